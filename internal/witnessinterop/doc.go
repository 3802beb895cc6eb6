// Package witnessinterop holds the interop tests that need the
// transparency-dev witness (github.com/transparency-dev/witness, a pinned
// pseudo-version), which no one here wrote, both ways round: the service's
// witness submission (internal/app/witness.go) against its witness package on
// a loopback listener, trusting the service key for auditchain/ origins; and
// our witness (internal/witness) against its client and library.
//
// It is a module of its own so that the witness's dependencies (newer
// pre-release versions of transparency-dev/formats and merkle among them)
// never reach the service's go.mod: the service keeps formats v0.1.1 and
// its modernc.org/libc pin. .ci/run runs its tests (docs/integrity.md
// "Witnesses").
package witnessinterop
