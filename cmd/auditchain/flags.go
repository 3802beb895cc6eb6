package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
)

// Exit codes (docs/cli.md): 0 success, 1 an error, 2 a usage error (an
// unknown command or flag, a missing argument).
const (
	exitFailure = 1
	exitUsage   = 2
)

// errHelpShown ends a command whose help was asked for and printed (on
// stdout): run answers nil, so `--help` exits 0.
var errHelpShown = errors.New("help shown")

// usageError is a command line the program cannot run; it exits 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usagef is a usage error with a message.
func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// newFlags is a command's flag set; synopsis is its first usage lines, the
// flags' defaults follow.
func newFlags(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), synopsis)
		if hasFlags(fs) {
			fmt.Fprintln(fs.Output(), "\nflags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

func hasFlags(fs *flag.FlagSet) bool {
	any := false
	fs.VisitAll(func(*flag.Flag) { any = true })
	return any
}

// parseFlags parses args, flags before or after the positional arguments,
// and returns the positional ones. Help (-h, --help) goes to stdout and
// answers errHelpShown; a bad flag answers a usage error saying what to do.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) ([]string, error) {
	var positional []string
	for {
		if err := parseLeading(fs, args, stdout, stderr); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(positional, rest...), nil // after "--", nothing is a flag
		}
		if len(rest) == 0 {
			return positional, nil
		}
		positional, args = append(positional, rest[0]), rest[1:]
	}
}

// parseLeading is one fs.Parse (flags up to the first positional argument,
// the rest left in fs.Args()) with help and usage errors as parseFlags
// answers them: a bad flag is one line saying what to do (flagProblem),
// without the flag package's text and usage.
func parseLeading(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) error {
	var buf bytes.Buffer
	fs.SetOutput(&buf)
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	if errors.Is(err, flag.ErrHelp) {
		stdout.Write(buf.Bytes())
		return errHelpShown
	}
	if err != nil {
		return usageError{flagProblem(fs, err)}
	}
	stderr.Write(buf.Bytes())
	return nil
}

// flagGiven reports whether the flag name was set on the command line (not
// only defaulted, from the environment or the built-in value).
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}
