package config

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"90s", 90 * time.Second},
		{"15m", 15 * time.Minute},
		{"2h", 2 * time.Hour},
		{"1h30m", 90 * time.Minute},
		{"-1h", -time.Hour}, // Go's own forms keep their sign
		{"0", 0},
		{"1d", 24 * time.Hour},
		{"7d", 7 * 24 * time.Hour},
		{"1d12h", 36 * time.Hour},
		{"0d", 0},
	} {
		got, err := ParseDuration(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "1", "d", "1.5d", "-1d", "+1d", "1d-1h", "1dd", "1w", "tomorrow", "99999999d"} {
		_, err := ParseDuration(in)
		if err == nil {
			t.Errorf("ParseDuration(%q) accepted", in)
			continue
		}
		// Every refusal names the forms that would have worked.
		if !strings.Contains(err.Error(), "90s, 15m, 2h") || !strings.Contains(err.Error(), "7d") {
			t.Errorf("ParseDuration(%q): %v does not name the accepted forms", in, err)
		}
	}
}

func TestDurationFlagAcceptsDays(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var d time.Duration
	DurationVar(fs, &d, "expires-in", time.Hour, "")
	if d != time.Hour {
		t.Fatalf("default %v, want 1h", d)
	}
	if err := fs.Parse([]string{"--expires-in", "7d"}); err != nil || d != 7*24*time.Hour {
		t.Fatalf("--expires-in 7d: %v, %v", d, err)
	}
	err := fs.Parse([]string{"--expires-in", "1x"})
	if err == nil || !strings.Contains(err.Error(), DurationForms) {
		t.Fatalf("--expires-in 1x: %v, want the accepted forms", err)
	}
	if got := fs.Lookup("expires-in").Value.(flag.Getter).Get(); got != 7*24*time.Hour {
		t.Fatalf("Get() = %v", got)
	}
}

// serve's durations, flags and AUDITCHAIN_* variables alike, read days too.
func TestParseServeDurationsInDays(t *testing.T) {
	env := map[string]string{"AUDITCHAIN_SESSION_TTL": "14d"}
	c, err := Parse([]string{"--shutdown-timeout", "1m"}, func(k string) string { return env[k] }, io.Discard)
	if err != nil || c.SessionTTL != 14*24*time.Hour || c.ShutdownTimeout != time.Minute {
		t.Fatalf("Parse: %v, session-ttl %v, shutdown-timeout %v", err, c.SessionTTL, c.ShutdownTimeout)
	}
	env["AUDITCHAIN_SESSION_TTL"] = "2 weeks"
	_, err = Parse(nil, func(k string) string { return env[k] }, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "AUDITCHAIN_SESSION_TTL") || !strings.Contains(err.Error(), "7d") {
		t.Fatalf("AUDITCHAIN_SESSION_TTL=2 weeks: %v, want the variable and the accepted forms named", err)
	}
}
