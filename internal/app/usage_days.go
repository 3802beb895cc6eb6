package app

import (
	"context"
	"time"

	"github.com/auditchain/auditchain/internal/domain"
)

// MaxUsageDays bounds the days UsageDays reads.
const MaxUsageDays = 90

// UsageDay is one UTC day of an account's credentialed calls.
type UsageDay struct {
	Day          string
	BySurface    map[string]int64
	ByCapability map[string]int64
}

// Total is the day's calls (each call counts once by surface).
func (d UsageDay) Total() int64 {
	var n int64
	for _, v := range d.BySurface {
		n += v
	}
	return n
}

// UsageDays is the caller's calls by surface and capability on each of the
// last days UTC days (1 to MaxUsageDays), oldest first, today included with
// this replica's counts not yet flushed, as DashboardUsage counts today.
func (a *App) UsageDays(ctx context.Context, p Principal, days int) ([]UsageDay, error) {
	days = min(max(days, 1), MaxUsageDays)
	now := a.now().UTC()
	first := now.AddDate(0, 0, -(days - 1))
	from, to := domain.QuotaDay(first), domain.QuotaDay(now)
	a.meter.flushMu.Lock()
	defer a.meter.flushMu.Unlock()
	surf, err := a.store.UsageByDay(ctx, p.UserID, UsageSurface, from, to)
	if err != nil {
		return nil, err
	}
	capa, err := a.store.UsageByDay(ctx, p.UserID, UsageCapability, from, to)
	if err != nil {
		return nil, err
	}
	out := make([]UsageDay, days)
	for i := range out {
		d := domain.QuotaDay(first.Add(time.Duration(i) * 24 * time.Hour))
		out[i] = UsageDay{Day: d, BySurface: orEmpty(surf[d]), ByCapability: orEmpty(capa[d])}
	}
	today := &out[days-1]
	for k, n := range a.pendingUsage(p.UserID, usageDay(now), UsageSurface) {
		today.BySurface[k] += n
	}
	for k, n := range a.pendingUsage(p.UserID, usageDay(now), UsageCapability) {
		today.ByCapability[k] += n
	}
	return out, nil
}

func orEmpty(m map[string]int64) map[string]int64 {
	if m == nil {
		return map[string]int64{}
	}
	return m
}
