package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestUnavailable(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"connection refused", fmt.Errorf("query: %w", refused), true},
		{"connection cut mid-answer", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{"pool handed a dead connection", driver.ErrBadConn, true},
		{"PostgreSQL connection exception 08006", &pgconn.PgError{Code: "08006"}, true},
		{"PostgreSQL shutting down 57P01", &pgconn.PgError{Code: "57P01"}, true},
		{"PostgreSQL starting up 57P03", &pgconn.PgError{Code: "57P03"}, true},
		{"PostgreSQL disk full 53100", &pgconn.PgError{Code: "53100"}, true},
		{"PostgreSQL too many connections 53300", &pgconn.PgError{Code: "53300"}, true},
		{"unique violation is a conflict, not an outage", &pgconn.PgError{Code: "23505"}, false},
		{"syntax error is a bug, not an outage", &pgconn.PgError{Code: "42601"}, false},
		{"a plain error", errors.New("boom"), false},
		{"a normal end of stream", io.EOF, false},
		{"an outbound HTTP call that failed", &url.Error{Op: "Post", URL: "http://tsa.example", Err: refused}, false},
		{"a statement refused on a poisoned connection", errPoisoned, true},
		{"a cancelled request", context.Canceled, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Unavailable(tt.err); got != tt.want {
				t.Fatalf("Unavailable(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}
