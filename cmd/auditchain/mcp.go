package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/auditchain/auditchain/internal/mcpserver"
	"github.com/auditchain/auditchain/pkg/client"
)

const mcpUsage = `usage:
  auditchain mcp [--url URL] [--api-key KEY]
      serve auditchain's tools to an agent host over stdio (surface mcp_stdio)
  auditchain mcp proxy [--url URL] [--api-key KEY] [--subagent NAME] [--fail-open] -- COMMAND [ARGS…]
      start the MCP server COMMAND and serve its tools over stdio, every call
      checked at the gate for NAME (default: COMMAND's base name), metered and
      recorded; refused while the service is unreachable unless --fail-open

URL and KEY default to AUDITCHAIN_URL and AUDITCHAIN_API_KEY. See docs/mcp.md.
`

// mcpCmd runs `auditchain mcp` and `auditchain mcp proxy`: both speak MCP on
// the process's stdin and stdout (stdout here), log to stderr, and reach the
// service through pkg/client.
func mcpCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	proxy := len(args) > 0 && args[0] == "proxy"
	if proxy {
		args = args[1:]
	}
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), mcpUsage) }
	url, key := serviceFlags(fs, getenv)
	subagent := fs.String("subagent", "", "proxy: the sub-agent the gate checks (default: the command's base name)")
	failOpen := fs.Bool("fail-open", false, "proxy: let calls through while the service is unreachable")
	// Flags end at the first argument: the proxy's COMMAND keeps its own.
	if err := parseLeading(fs, args, stdout, stderr); err != nil {
		return err
	}
	if err := serviceMissing("mcp", *url, *key); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	surface := client.SurfaceMCPStdio
	c, err := client.New(*url, *key, client.WithSurface(surface))
	if err != nil {
		return err
	}
	if !proxy {
		if fs.NArg() > 0 {
			return fmt.Errorf("mcp: unexpected arguments %q (did you mean `auditchain mcp proxy -- …`?)", fs.Args())
		}
		host := &mcpserver.StdioTransport{In: os.Stdin, Out: stdout, Log: log}
		return ignoreClosed(mcpserver.New(mcpserver.Static(c), mcpserver.Options{Log: log}).Run(ctx, host))
	}

	if fs.NArg() == 0 {
		fs.Usage()
		return errors.New("mcp proxy: the upstream server's command is needed after --")
	}
	if *subagent == "" {
		*subagent = filepath.Base(fs.Arg(0))
	}
	cmd := exec.CommandContext(ctx, fs.Arg(0), fs.Args()[1:]...)
	cmd.Stderr = stderr
	upstream, err := mcpserver.CommandUpstream(cmd)
	if err != nil {
		return err
	}
	p, err := mcpserver.NewProxy(upstream, mcpserver.ProxyOptions{Subagent: *subagent, FailOpen: *failOpen, Service: c, Log: log})
	if err != nil {
		upstream.Close()
		return err
	}
	defer p.Close()
	return ignoreClosed(p.Serve(ctx, os.Stdin, stdout))
}

// ignoreClosed treats the host closing stdin, or an interrupt, as the end.
func ignoreClosed(err error) error {
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) || errors.Is(err, mcp.ErrConnectionClosed) {
		return nil
	}
	return err
}
