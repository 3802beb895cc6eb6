// Package api holds the request and response shapes of auditchain's HTTP
// API (SPEC.md's resources), one definition each, for the server and its
// clients alike. It depends on the standard library only; timestamps are
// the strings the server sends (ISO-8601 with a UTC offset).
package api
