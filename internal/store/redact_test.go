package store_test

import (
	"testing"

	"github.com/auditchain/auditchain/internal/store"
)

// A store named in a message keeps where it is and drops who may log in.
func TestRedacted(t *testing.T) {
	for _, tc := range []struct{ dsn, want string }{
		{"sqlite:./data/auditchain.db", "sqlite:./data/auditchain.db"},
		{"postgres://user:pw@db.internal:5432/auditchain?sslmode=require", "postgres://db.internal:5432/auditchain"},
		{"postgresql://user:p@ss@db/ac", "postgresql://db/ac"},
		{"mysql:user:pw@tcp(db)/ac", "mysql:…"},
	} {
		if got := store.Redacted(tc.dsn); got != tc.want {
			t.Errorf("Redacted(%q) = %q, want %q", tc.dsn, got, tc.want)
		}
	}
}
