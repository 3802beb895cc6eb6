package main

import (
	"fmt"
	"io"
	"os"
)

// progress is a long command's progress line on stderr: shown only when
// stderr is a terminal and --quiet is not given, redrawn in place, and
// cleared when the command ends, so redirected output holds results only.
type progress struct {
	w  io.Writer
	on bool
}

func newProgress(stderr io.Writer, quiet bool) *progress {
	f, ok := stderr.(*os.File)
	return &progress{w: stderr, on: !quiet && ok && isTerminal(f)}
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// show replaces the progress line.
func (p *progress) show(format string, a ...any) {
	if p.on {
		fmt.Fprintf(p.w, "\r\033[K"+format, a...)
	}
}

// done clears the progress line.
func (p *progress) done() {
	if p.on {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
