package progress

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// clock is a test clock moved by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestLineCountsRateLimitedAndSummarised(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	var out bytes.Buffer
	l := Start(&out, true, Options{Label: "chain export", Unit: "events", Total: 200, Every: time.Second, Now: c.now})
	if got, want := out.String(), "\rchain export: 0 of 200 events (0%), 0.0s"; got != want {
		t.Fatalf("first draw %q, want %q", got, want)
	}
	out.Reset()
	l.Add(10)
	c.advance(500 * time.Millisecond)
	l.Add(10)
	if out.Len() != 0 {
		t.Fatalf("redrawn within Every: %q", out.String())
	}
	c.advance(600 * time.Millisecond)
	l.Add(30)
	if got, want := out.String(), "\rchain export: 50 of 200 events (25%), 1.1s"; got != want {
		t.Fatalf("due redraw %q, want %q", got, want)
	}
	out.Reset()
	c.advance(900 * time.Millisecond)
	l.Add(150)
	l.Done()
	if got, want := out.String(), "\rchain export: 200 of 200 events (100%), 2.0s\n"; got != want {
		t.Fatalf("summary %q, want %q", got, want)
	}
	out.Reset()
	l.Add(1)
	l.Done()
	if out.Len() != 0 {
		t.Fatalf("drawn after Done: %q", out.String())
	}
}

// A shorter line blanks out what is left of the longer one before it.
func TestLineBlanksTheRest(t *testing.T) {
	c := &clock{t: time.Unix(0, 0)}
	var out bytes.Buffer
	l := Start(&out, true, Options{Label: "x", Unit: "n", Every: time.Second, Now: c.now})
	l.Add(100000)
	c.advance(time.Second)
	l.Add(0)
	first := len("\rx: 0 n, 0.0s")
	if got, want := out.String()[first:], "\rx: 100000 n, 1.0s"; got != want {
		t.Fatalf("second draw %q, want %q", got, want)
	}
	out.Reset()
	l2 := &Line{w: &out, o: Options{Label: "x", Now: c.now, Every: time.Second}, start: c.t, width: 20, stop: make(chan struct{})}
	l2.Tick()
	if got, want := out.String(), "\rx: 0.0s"+strings.Repeat(" ", 20-len("x: 0.0s")); got != want {
		t.Fatalf("shorter draw %q, want %q", got, want)
	}
}

// With a Delay, a short operation draws nothing at all, Done included; a
// long one starts drawing once the Delay has passed. Without a Unit the
// line is the time alone.
func TestLineDelay(t *testing.T) {
	c := &clock{t: time.Unix(0, 0)}
	var out bytes.Buffer
	l := Start(&out, true, Options{Label: "chain tip", Delay: 2 * time.Second, Now: c.now})
	c.advance(time.Second)
	l.Tick()
	l.Done()
	if out.Len() != 0 {
		t.Fatalf("a 1s operation drew %q", out.String())
	}
	l = Start(&out, true, Options{Label: "chain verify, waiting for the service", Delay: 2 * time.Second, Now: c.now})
	c.advance(2500 * time.Millisecond)
	l.Tick()
	l.Done()
	if got, want := out.String(), "\rchain verify, waiting for the service: 2.5s\rchain verify, waiting for the service: 2.5s\n"; got != want {
		t.Fatalf("a 2.5s operation drew %q, want %q", got, want)
	}
}

func TestLineOffDrawsNothing(t *testing.T) {
	var out bytes.Buffer
	l := Start(&out, false, Options{Label: "chain export", Unit: "events"})
	l.Add(5)
	l.Tick()
	l.Done()
	if out.Len() != 0 {
		t.Fatalf("an off line drew %q", out.String())
	}
}

// With the real clock the Line redraws by itself while nothing is counted,
// and Done stops that before it returns.
func TestLineRedrawsOnItsOwn(t *testing.T) {
	out := &signalBuffer{wrote: make(chan struct{}, 100)}
	l := Start(out, true, Options{Label: "wait", Every: time.Millisecond})
	for range 3 { // the first draw, then two of the timer's
		select {
		case <-out.wrote:
		case <-time.After(10 * time.Second):
			t.Fatal("the line was not redrawn by its timer within 10s")
		}
	}
	l.Done()
	n := out.count()
	if !strings.HasSuffix(out.text(), "\n") {
		t.Fatalf("no summary line: %q", out.text())
	}
	l.Tick()
	if out.count() != n {
		t.Fatal("drawn after Done returned")
	}
}

type tty struct{ bytes.Buffer }

func (*tty) IsTerminal() bool { return true }

func TestIsTerminal(t *testing.T) {
	if !IsTerminal(&tty{}) {
		t.Error("a writer that says it is a terminal is not taken for one")
	}
	if IsTerminal(&bytes.Buffer{}) {
		t.Error("a buffer is taken for a terminal")
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if IsTerminal(f) {
		t.Error("a regular file is taken for a terminal")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if IsTerminal(w) {
		t.Error("a pipe is taken for a terminal")
	}
}
