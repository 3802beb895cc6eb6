package app

import (
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/domain"
)

// BenchmarkMeterGateCheck is the meter's work for one gate check: the call
// counted by capability and surface, and the check by status.
func BenchmarkMeterGateCheck(b *testing.B) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	a := &App{Now: func() time.Time { return now }, meter: newMeter()}
	users := []string{"01a21924-c987-77c3-a2e1-863424e8664d", "01a21924-c987-77c3-a2e1-863424e8664e"}
	b.ReportAllocs()
	for i := range b.N {
		u := users[i&1]
		a.CountCall(u, "grants:read", "rest")
		a.countGate(u, "authorized")
	}
}

// The meter's day numbers name the days domain.QuotaDay names, up to the
// last microsecond of each.
func TestUsageDayIsTheQuotaDay(t *testing.T) {
	for _, at := range []time.Time{
		time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 11, 26, 23, 59, 59, 999999000, time.UTC),
		time.Date(2026, 11, 27, 0, 0, 0, 0, time.FixedZone("CET", 3600)), // 2026-11-26 in UTC
		time.Date(2028, 2, 29, 12, 0, 0, 0, time.UTC),
	} {
		if got, want := usageDayString(usageDay(at)), domain.QuotaDay(at); got != want {
			t.Errorf("%v: meter day %s, quota day %s", at, got, want)
		}
	}
}
