package main

// `auditchain health`: the probe a container's HEALTHCHECK or a process
// manager runs. The image has no curl, so the binary probes itself.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"strings"
	"time"

	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/pkg/api"
)

const healthUsage = `usage: auditchain health [--url URL] [--timeout D]

Asks GET URL/v1/health and prints its answer. Exit 0 when the service
answers 200 with status "ok"; 1 when it answers otherwise or cannot be
reached. URL is --url, else $AUDITCHAIN_URL, else the address serve reads
from $AUDITCHAIN_ADDR (an unspecified host such as 0.0.0.0 asked on
loopback), else http://127.0.0.1:8080. No API key is needed.
`

func healthCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("health", healthUsage)
	// A URL may carry a password: a secret flag, and only its host is ever printed.
	def := localURL(getenv("AUDITCHAIN_ADDR"))
	url := new(string)
	config.SecretVar(fs, url, "url", envOr(getenv, "AUDITCHAIN_URL", def), def, "the service's base URL (AUDITCHAIN_URL)")
	timeout := fs.Duration("timeout", 5*time.Second, "how long to wait for the answer")
	rest, err := parseFlags(fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	if err := noPositional(rest); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	u, err := neturl.Parse(strings.TrimRight(*url, "/") + "/v1/health")
	if err != nil || u.Host == "" {
		return usagef("--url: want the service's base URL, such as http://127.0.0.1:8080")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return usagef("--url: want the service's base URL, such as http://127.0.0.1:8080")
	}
	u.User = nil
	target := u.String()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		// err (a *url.Error) quotes the whole URL: only its innermost cause is shown.
		var ue *neturl.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("health: %s cannot be reached (%v); is `auditchain serve` running there?", target, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	if err != nil {
		return fmt.Errorf("health: %s: %v", target, err)
	}
	var h api.Health
	if res.StatusCode != http.StatusOK || json.Unmarshal(body, &h) != nil || h.Status != "ok" {
		return fmt.Errorf("health: %s answered %s: %s", target, res.Status, strings.TrimSpace(string(body)))
	}
	fmt.Fprintf(stdout, "%s\n", strings.TrimSpace(string(body)))
	return nil
}

// localURL is the URL on this host of a server listening on addr (serve's
// --addr): a container's health check then follows AUDITCHAIN_ADDR.
func localURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://127.0.0.1:8080"
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	return "http://" + net.JoinHostPort(host, port)
}
