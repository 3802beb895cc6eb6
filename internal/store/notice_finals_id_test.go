package store_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditchain/auditchain/internal/store"
)

// A final row's id is a UUIDv7 (RFC 9562) of its stamp — the millisecond in
// unix_ts_ms, the microseconds within it in rand_a (§6.2, method 3) — and
// its notice's salt; read back, it gives both, and nothing else parses.
func TestFinalRowIDRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 27, 6, 30, 0, 123456000, time.UTC).UnixMicro()
	for _, c := range []struct{ at, salt int64 }{{at, 1}, {at + 999, 1<<62 - 1}, {at + 1000, 42}, {0, 5}} {
		id := store.FinalRowID(c.at, c.salt)
		u, err := uuid.Parse(id)
		if err != nil || u.Version() != 7 || u.Variant() != uuid.RFC4122 {
			t.Fatalf("%s: %v, version %d, variant %v", id, err, u.Version(), u.Variant())
		}
		if sec, nsec := u.Time().UnixTime(); time.Unix(sec, nsec).UnixMilli() != c.at/1000 {
			t.Errorf("%s: timestamp %v, want the millisecond of %d", id, time.Unix(sec, nsec), c.at)
		}
		gotAt, gotSalt, ok := store.ParseFinalRowID(id)
		if !ok || gotAt != c.at || gotSalt != c.salt {
			t.Errorf("%s read back as %d, %d, %v; want %d, %d", id, gotAt, gotSalt, ok, c.at, c.salt)
		}
	}
	id := store.FinalRowID(at, 77)
	for _, bad := range []string{
		"", "not-a-uuid", strings.ToUpper(id), "{" + id + "}", strings.ReplaceAll(id, "-", ""),
		uuid.NewString(),          // version 4
		id[:15] + "fff" + id[18:], // rand_a 4095: 1,000 µs, not within the millisecond
		id[:15] + "001" + id[18:], // rand_a 1: no microsecond scales to it
	} {
		if _, _, ok := store.ParseFinalRowID(bad); ok {
			t.Errorf("%q parsed as a final row's id", bad)
		}
	}
}
