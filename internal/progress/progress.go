// Package progress shows how far a long operation has got as one line on
// a terminal, rewritten in place ("\r") at most a few times a second, and
// left with its final figures when the operation ends. It draws only when
// the caller says to: the CLI's rule (docs/cli.md "Progress") is stderr a
// terminal (IsTerminal) and no --quiet, so scripts and pipes get nothing.
//
// Use:
//
//	line := progress.Start(stderr, progress.IsTerminal(stderr) && !quiet,
//		progress.Options{Label: "chain export", Unit: "events", Total: n})
//	defer line.Done()
//	... line.Add(1) for each item ...
//
// A Line is safe for concurrent use; a Line that is off does nothing.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// IsTerminal reports whether w is a terminal: a writer that says so itself
// (an IsTerminal() bool method: how tests force either answer), or an
// *os.File on a character device. /dev/null is one too; what is drawn there
// is lost, which is what quiet means anyway.
func IsTerminal(w io.Writer) bool {
	if t, ok := w.(interface{ IsTerminal() bool }); ok {
		return t.IsTerminal()
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Options describe a line.
type Options struct {
	Label string // what runs, first on the line: "chain export"
	Unit  string // what Add counts ("events"); "" when only the time is shown
	Total int64  // the count at the end, for a percentage; 0 when not known
	// Delay keeps the line off until the operation has run this long
	// (0: drawn from the start), so short operations print nothing.
	Delay time.Duration
	// Every is the least time between two redraws (default 200ms).
	Every time.Duration
	// Now is the clock (default time.Now). With a clock of its own the
	// Line runs no timer: it redraws on Add and Tick only, as tests need.
	Now func() time.Time
}

// Line is one progress line.
type Line struct {
	w     io.Writer
	o     Options
	start time.Time
	stop  chan struct{}
	wg    sync.WaitGroup

	mu    sync.Mutex
	n     int64
	last  time.Time // when it was last drawn; zero before the first time
	width int       // the length of what was last drawn, to blank it out
	done  bool
}

// Start begins a line on w; when on is false the Line does nothing.
func Start(w io.Writer, on bool, o Options) *Line {
	if !on {
		return &Line{done: true}
	}
	if o.Every <= 0 {
		o.Every = 200 * time.Millisecond
	}
	realClock := o.Now == nil
	if realClock {
		o.Now = time.Now
	}
	l := &Line{w: w, o: o, start: o.Now(), stop: make(chan struct{})}
	if realClock {
		// Redraws the time while nothing is counted (a request waiting
		// for its answer).
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			t := time.NewTicker(o.Every)
			defer t.Stop()
			for {
				select {
				case <-l.stop:
					return
				case <-t.C:
					l.Tick()
				}
			}
		}()
	}
	l.Tick()
	return l
}

// Add counts n more and redraws the line when it is due.
func (l *Line) Add(n int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n += n
	l.drawIfDue()
}

// Tick redraws the line when it is due (the time shown moves on).
func (l *Line) Tick() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.drawIfDue()
}

// Done ends the line: when anything was drawn, it is drawn a last time
// with the final figures and a newline, so the terminal keeps the summary.
// Done may be called more than once.
func (l *Line) Done() {
	l.mu.Lock()
	if l.done {
		l.mu.Unlock()
		return
	}
	l.done = true
	if !l.last.IsZero() {
		l.draw(l.o.Now())
		fmt.Fprintln(l.w)
	}
	l.mu.Unlock()
	close(l.stop)
	l.wg.Wait()
}

func (l *Line) drawIfDue() {
	if l.done {
		return
	}
	now := l.o.Now()
	if now.Sub(l.start) < l.o.Delay || (!l.last.IsZero() && now.Sub(l.last) < l.o.Every) {
		return
	}
	l.draw(now)
}

func (l *Line) draw(now time.Time) {
	l.last = now
	text := l.text(now.Sub(l.start))
	pad := max(l.width-len(text), 0)
	l.width = len(text)
	fmt.Fprintf(l.w, "\r%s%s", text, strings.Repeat(" ", pad))
}

// text is the line: label, count (of total, percent), elapsed time.
func (l *Line) text(elapsed time.Duration) string {
	var b strings.Builder
	b.WriteString(l.o.Label)
	b.WriteString(": ")
	if l.o.Unit != "" {
		fmt.Fprintf(&b, "%d", l.n)
		if l.o.Total > 0 {
			fmt.Fprintf(&b, " of %d", l.o.Total)
		}
		fmt.Fprintf(&b, " %s", l.o.Unit)
		if l.o.Total > 0 {
			fmt.Fprintf(&b, " (%d%%)", min(100, l.n*100/l.o.Total))
		}
		b.WriteString(", ")
	}
	fmt.Fprintf(&b, "%.1fs", elapsed.Seconds())
	return b.String()
}
