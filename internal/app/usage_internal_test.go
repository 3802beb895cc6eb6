package app

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/domain"
)

// BenchmarkMeterGateCheck is the meter's work for one gate check: the call
// counted by capability and surface, and the check by status.
func BenchmarkMeterGateCheck(b *testing.B) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	a := &App{now: func() time.Time { return now }, meter: newMeter()}
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

// The meter holds one counter per account, day, kind and name — a call
// moves two, a gate check one — reads back an account's pending counts by
// kind, and wakes the flusher once it holds maxMeterKeys counters.
func TestMeterCountsAndWakesTheFlusherWhenFull(t *testing.T) {
	now := time.Date(2026, 11, 27, 5, 30, 0, 0, time.UTC)
	a := &App{now: func() time.Time { return now }, meter: newMeter()}
	for range 3 {
		a.CountCall("u1", "grants", "rest")
	}
	a.CountCall("u1", "grants", "mcp")
	a.countGate("u1", "authorized")
	a.countGate("u1", "authorized")
	a.countGate("u1", "revoked")
	a.countUses("u1", 5)
	a.CountCall("u2", "events:write", "rest")
	day := usageDay(now)
	for kind, want := range map[string]map[string]int64{
		UsageCapability: {"grants": 4},
		UsageSurface:    {"rest": 3, "mcp": 1},
		UsageGate:       {"authorized": 2, "revoked": 1},
		UsageUses:       {"uses": 5},
	} {
		if got := a.pendingUsage("u1", day, kind); !maps.Equal(got, want) {
			t.Errorf("u1 %s: %v, want %v", kind, got, want)
		}
	}
	if got := a.pendingUsage("u1", day+1, UsageCapability); len(got) != 0 {
		t.Errorf("u1 the next day: %v, want none", got)
	}
	if a.meter.cells != 8 { // u1: grants, rest, mcp, authorized, revoked, uses; u2: events:write, rest
		t.Errorf("%d counters held, want 8", a.meter.cells)
	}
	select {
	case <-a.meter.full:
		t.Fatal("the flusher woken below the bound")
	default:
	}
	for i := a.meter.cells; i < maxMeterKeys; i += 2 {
		a.CountCall(fmt.Sprintf("user-%d", i), "grants", "rest")
	}
	select {
	case <-a.meter.full:
	default:
		t.Fatalf("%d counters held and the flusher not woken", a.meter.cells)
	}
}
