package config

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// DurationForms names the durations every flag and AUDITCHAIN_* variable
// of the program accepts (ParseDuration), for the messages that refuse one.
const DurationForms = "a number and a unit (ms, s, m, h), like 90s, 15m, 2h or 1h30m, or whole days: 1d, 7d, 1d12h (a day is 24h)"

// ParseDuration reads Go's durations (time.ParseDuration: 90s, 15m, 2h30m)
// and, in front of one or alone, whole days ("7d", "1d12h"): people write
// lifetimes in days, and a day here is always 24 hours (no calendar, no
// daylight saving). The error names the accepted forms.
func ParseDuration(s string) (time.Duration, error) {
	days, rest, hasDays := strings.Cut(s, "d")
	if !hasDays {
		if d, err := time.ParseDuration(s); err == nil {
			return d, nil
		}
		return 0, durationError(s)
	}
	n, err := strconv.ParseUint(days, 10, 16)
	if err != nil || days == "" || days[0] == '+' {
		return 0, durationError(s)
	}
	d := time.Duration(n) * 24 * time.Hour
	if rest == "" {
		return d, nil
	}
	extra, err := time.ParseDuration(rest)
	if err != nil || extra < 0 || strings.HasPrefix(rest, "+") || d+extra < d {
		return 0, durationError(s)
	}
	return d + extra, nil
}

func durationError(s string) error {
	return fmt.Errorf("%q is not a duration: use %s", s, DurationForms)
}

// DurationVar defines a duration flag read by ParseDuration.
func DurationVar(fs *flag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var((*durationValue)(p), name, usage)
}

type durationValue time.Duration

func (d *durationValue) Set(s string) error {
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = durationValue(v)
	return nil
}

func (d *durationValue) String() string { return time.Duration(*d).String() }

// Get implements flag.Getter.
func (d *durationValue) Get() any { return time.Duration(*d) }
