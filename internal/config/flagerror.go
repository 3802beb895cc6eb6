package config

import "flag"

// FlagError is a serve command line the flag package could not read (an
// unknown flag, a flag without its value, a value of the wrong kind): Err
// is the flag package's error, Flags the serve flags, so that the command
// can name the flag meant (cmd/auditchain's flagProblem).
type FlagError struct {
	Err   error
	Flags *flag.FlagSet
}

func (e *FlagError) Error() string { return e.Err.Error() }
func (e *FlagError) Unwrap() error { return e.Err }
