package main

// Progress of the client verbs on stderr (internal/progress, docs/cli.md
// "Progress"): drawn only when stderr is a terminal and --quiet is not
// given. chain export counts its events from the start; chain verify (the
// service checking every block, seconds on a long chain) shows its time
// from the start; any other verb shows its time once it has run
// progressDelay.

import (
	"bytes"
	"context"
	"io"
	"time"

	"github.com/auditchain/auditchain/internal/progress"
	"github.com/auditchain/auditchain/pkg/client"
)

// progressDelay is how long a verb runs before its line appears: shorter
// ones stay quiet.
const progressDelay = 2 * time.Second

// progressOwn are the verbs that draw their own line (export) or none (tail
// streams on stdout until stopped).
var progressOwn = map[string]bool{"chain export": true, "events tail": true}

// progressFrom are the verbs whose line is drawn from the start.
var progressFrom = map[string]time.Duration{"chain verify": 0}

type progressKey struct{}

// progressTarget is where a verb draws, and whether it does.
type progressTarget struct {
	w  io.Writer
	on bool
}

// withProgress records in ctx whether the verb shows progress on stderr.
func withProgress(ctx context.Context, stderr io.Writer, quiet bool) context.Context {
	return context.WithValue(ctx, progressKey{}, progressTarget{stderr, !quiet && progress.IsTerminal(stderr)})
}

// startProgress begins a verb's line (off when ctx says so).
func startProgress(ctx context.Context, o progress.Options) *progress.Line {
	p, _ := ctx.Value(progressKey{}).(progressTarget)
	return progress.Start(p.w, p.on, o)
}

// runWithProgress runs a verb under the time-only line the verbs share.
func runWithProgress(ctx context.Context, verb string, run func() (any, error)) (any, error) {
	if progressOwn[verb] {
		return run()
	}
	delay, ok := progressFrom[verb]
	if !ok {
		delay = progressDelay
	}
	line := startProgress(ctx, progress.Options{Label: verb + ", waiting for the service", Delay: delay})
	defer line.Done()
	return run()
}

// exportProgress is where chain export writes: w, its event lines counted
// on a line whose total is the chain's event count in the range asked for
// (one more request, made only when the line is drawn).
func exportProgress(ctx context.Context, c *client.Client, from, to *int64, w io.Writer) (io.Writer, func()) {
	p, _ := ctx.Value(progressKey{}).(progressTarget)
	if !p.on {
		return w, func() {}
	}
	var total int64
	if tip, err := c.Tip(ctx); err == nil {
		total = tip.EventCount
		if to != nil && *to < total {
			total = *to
		}
		if from != nil {
			total -= min(*from, total)
		}
	}
	line := startProgress(ctx, progress.Options{Label: "chain export", Unit: "events", Total: total})
	return &eventCounter{w: w, line: line}, line.Done
}

// eventPrefix begins every event line of an export (docs/integrity.md).
var eventPrefix = []byte(`{"kind":"event"`)

// eventCounter passes an export through, counting the lines that begin
// with eventPrefix, wherever the writes cut them.
type eventCounter struct {
	w    io.Writer
	line *progress.Line
	head []byte // the start of the current line, up to len(eventPrefix)
}

func (e *eventCounter) Write(p []byte) (int, error) {
	var n int64
	for rest := p; len(rest) > 0; {
		if len(e.head) < len(eventPrefix) {
			take := min(len(eventPrefix)-len(e.head), len(rest))
			if i := bytes.IndexByte(rest[:take], '\n'); i >= 0 {
				take = i
			}
			e.head = append(e.head, rest[:take]...)
			if len(e.head) == len(eventPrefix) && bytes.Equal(e.head, eventPrefix) {
				n++
			}
		}
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			break
		}
		rest = rest[i+1:]
		e.head = e.head[:0]
	}
	if n > 0 {
		e.line.Add(n)
	}
	return e.w.Write(p)
}
