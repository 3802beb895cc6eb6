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

	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/mcpserver"
	"github.com/auditchain/auditchain/internal/progress"
	"github.com/auditchain/auditchain/pkg/client"
)

const mcpUsage = `usage:
  auditchain mcp [--url URL] [--api-key KEY]
      serve auditchain's tools to an agent host over stdio (surface mcp_stdio)
  auditchain mcp proxy [--url URL] [--api-key KEY] [--subagent NAME] [--fail-open] [--approval-wait D]
                      [--approval-elicit [--approver-key KEY2]] [--send-args-text] -- COMMAND [ARGS…]
      start the MCP server COMMAND and serve its tools over stdio, every call
      checked at the gate for NAME (default: COMMAND's base name), metered and
      recorded; refused while the service is unreachable unless --fail-open;
      a call held for a person's approval waits up to D (docs/approvals.md);
      with --approval-elicit the host's user is asked through MCP elicitation
      (when the host supports it) and the proxy decides with KEY2, another key
      holding the approvals capability (AUDITCHAIN_APPROVER_KEY): a weaker
      statement than a signed-in approver's (docs/approvals.md)
      --send-args-text shows the approver the arguments' text (off by default)

URL and KEY default to AUDITCHAIN_URL and AUDITCHAIN_API_KEY. See docs/mcp.md.
`

// mcpCmd runs `auditchain mcp` and `auditchain mcp proxy`: both speak MCP on
// stdin and stdout, log to stderr, and reach the service through pkg/client.
func mcpCmd(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	proxy := len(args) > 0 && args[0] == "proxy"
	if proxy {
		args = args[1:]
	}
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), mcpUsage) }
	url, key := serviceFlags(fs, getenv)
	subagent := fs.String("subagent", "", "proxy: the sub-agent the gate checks (default: the command's base name)")
	failOpen := fs.Bool("fail-open", false, "proxy: let calls through while the service is unreachable")
	approvalWait := fs.Duration("approval-wait", 0, "proxy: how long a call held for a person's approval waits for the decision (0: refuse it at once, naming the approval)")
	elicit := fs.Bool("approval-elicit", false, "proxy: ask the host's user about a held call through MCP elicitation, within --approval-wait, and decide it with --approver-key")
	approverKey := new(string)
	config.SecretVar(fs, approverKey, "approver-key", getenv("AUDITCHAIN_APPROVER_KEY"), "",
		"proxy: with --approval-elicit, the key that approves or denies on the host's user's answer: another key than --api-key, holding approvals (AUDITCHAIN_APPROVER_KEY)")
	sendArgsText := fs.Bool("send-args-text", false, "proxy: send each call's arguments as text, shown to whoever approves a call an approval rule holds, kept only while it is pending (off: the service sees only their digest)")
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
		return serveStdio(ctx, c, stdin, stdout, stderr, log)
	}

	if fs.NArg() == 0 {
		fs.Usage()
		return errors.New("mcp proxy: the upstream server's command is needed after --")
	}
	if *subagent == "" {
		*subagent = filepath.Base(fs.Arg(0))
	}
	var approver mcpserver.Approver
	if *elicit {
		// Separation of powers (docs/approvals.md): the service refuses the
		// caller's own key as approver; say so before the first call.
		switch {
		case *approvalWait <= 0:
			return errors.New("mcp proxy: --approval-elicit asks within --approval-wait: give it a duration (e.g. --approval-wait 2m)")
		case *approverKey == "":
			return errors.New("mcp proxy: --approval-elicit needs --approver-key (or AUDITCHAIN_APPROVER_KEY): another key than --api-key, holding the approvals capability")
		case *approverKey == *key:
			return errors.New("mcp proxy: --approver-key is the proxy's own key; the service refuses a call's own identity as its approver (separation of powers): give another key")
		}
		a, err := client.New(*url, *approverKey, client.WithSurface(surface))
		if err != nil {
			return err
		}
		approver = a
	}
	cmd := exec.CommandContext(ctx, fs.Arg(0), fs.Args()[1:]...)
	cmd.Stderr = stderr
	upstream, err := mcpserver.CommandUpstream(cmd)
	if err != nil {
		return err
	}
	p, err := mcpserver.NewProxy(upstream, mcpserver.ProxyOptions{Subagent: *subagent, FailOpen: *failOpen, Service: c, Log: log,
		ApprovalWait: *approvalWait, Approver: approver, SendArgsText: *sendArgsText})
	if err != nil {
		upstream.Close()
		return err
	}
	defer p.Close()
	return ignoreClosed(p.Serve(ctx, stdin, stdout))
}

// serveStdio serves the tools over stdin and stdout until the host closes
// stdin (MCP's stdio shutdown) or ctx ends. Input that never made a session
// (no initialize answered: a line typed or piped by hand, a file of
// something else) is an error that says so, exit 1, not a silent 0; each
// line that is not JSON-RPC has had its parse error answer on stdout.
func serveStdio(ctx context.Context, c *client.Client, stdin io.Reader, stdout, stderr io.Writer, log *slog.Logger) error {
	if f, ok := stdin.(*os.File); ok && progress.IsTerminal(f) {
		fmt.Fprintln(stderr, "auditchain mcp: speaking MCP (JSON-RPC, one message a line) on stdin and stdout, for an agent host to start (docs/mcp.md); waiting for its initialize, Ctrl-D ends")
	}
	host := &mcpserver.StdioTransport{In: stdin, Out: stdout, Log: log}
	err := ignoreClosed(mcpserver.New(mcpserver.Static(c), mcpserver.Options{Log: log}).Run(ctx, host))
	if err != nil || ctx.Err() != nil {
		return err
	}
	negotiated, unreadable := host.Session()
	switch {
	case negotiated:
		return nil
	case unreadable > 0:
		return fmt.Errorf("mcp: stdin ended without an MCP session: %d line(s) were not JSON-RPC messages (each answered on stdout with its error); an agent host starts auditchain mcp and sends initialize first (docs/mcp.md)", unreadable)
	}
	return errors.New("mcp: stdin ended before an MCP session began (no initialize was answered); an agent host starts auditchain mcp and sends initialize first (docs/mcp.md)")
}

// ignoreClosed treats the host closing stdin, or an interrupt, as the end.
func ignoreClosed(err error) error {
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) || errors.Is(err, mcp.ErrConnectionClosed) {
		return nil
	}
	return err
}
