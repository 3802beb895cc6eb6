package storetest

import (
	"strings"
	"testing"
)

// Without AUDITCHAIN_TEST_POSTGRES the PostgreSQL half is skipped (not
// passed), with a message naming the variable: what `go test -v` shows and
// the README tells readers to look for (a plain `go test ./...` prints only
// "ok" for a passing package, so the README does not promise more).
func TestPostgresIsSkippedSayingHow(t *testing.T) {
	t.Setenv(PostgresEnv, "")
	var ran []string
	Each(t, func(t *testing.T, dsn string) { ran = append(ran, strings.SplitN(dsn, ":", 2)[0]) })
	if len(ran) != 1 || ran[0] != "sqlite" {
		t.Fatalf("ran on %v, want sqlite only", ran)
	}
	rec := &skipRecorder{TB: t}
	func() {
		defer func() { recover() }() // SkipNow's Goexit is replaced by a panic below
		DSN(rec, Postgres)
	}()
	if !strings.Contains(rec.msg, "PostgreSQL tests skipped") || !strings.Contains(rec.msg, PostgresEnv) {
		t.Fatalf("skip message %q, want it to say PostgreSQL tests skipped and name %s", rec.msg, PostgresEnv)
	}
}

// skipRecorder records a Skip's message instead of skipping the test.
type skipRecorder struct {
	testing.TB
	msg string
}

func (r *skipRecorder) Skip(args ...any) {
	for _, a := range args {
		r.msg += a.(string)
	}
	panic("skipped")
}
func (r *skipRecorder) Helper() {}
