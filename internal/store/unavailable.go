package store

import (
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Unavailable reports whether err means the store could not be reached or
// could not store right now — the database is down or restarting, the network
// to it failed, its disk is full or failing — so the request may succeed if
// retried later. The HTTP layer answers such errors 503 with Retry-After
// instead of 500 (docs/reliability.md: "requests fail fast (503) while it is
// down"). A write that failed this way was not acknowledged, but whether it
// landed is unknown (the connection may have been cut during COMMIT).
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"): // connection exception
			return true
		case pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03": // admin/crash shutdown, cannot connect now
			return true
		case pgErr.Code == "53100", pgErr.Code == "53300": // disk full, too many connections
			return true
		}
		return false
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return false // an outbound HTTP call (a timestamp authority, say), not the store
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	if errors.As(err, &connectErr) || errors.As(err, &netErr) ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	if IsStorageFault(err) { // the SQLite connection was given up; a retry gets a new one
		return true
	}
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY // the busy timeout ran out
}
