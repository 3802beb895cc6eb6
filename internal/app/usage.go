package app

// Usage metering (CONTRACT.md "Usage"): one meter counts credentialed calls
// by account, UTC day, capability and surface, gate checks by status and
// grant uses, in memory, and adds them to the database in batches. A batch
// is written once or not at all — a failed flush drops it (logged), so
// nothing is ever counted twice; what a crash loses is at most one flush
// interval of this replica's counts (docs/decisions/jobs.md).

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/auditchain/auditchain/internal/app/writer"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/metrics"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
)

// Kinds of usage counts.
const (
	UsageCapability = "capability"
	UsageSurface    = "surface"
	UsageGate       = "gate"
	UsageUses       = "uses"
)

// CapabilityNone names the calls of credentialed routes that need no
// capability (keys, legal, sign-in session, usage itself).
const CapabilityNone = "none"

// UsageFlushInterval is how often serve adds the meter's counts to the
// database: the most a crash can lose.
const UsageFlushInterval = 10 * time.Second

// maxMeterKeys bounds the counters held between flushes; past it the flusher
// is woken early.
const maxMeterKeys = 50_000

// accountDay keys one account's counters of one UTC day. The day is a
// number (days since 1970-01-01 UTC), formatted only when counts leave the
// meter: a call is counted without formatting a date.
type accountDay struct {
	user string
	day  int64
}

// usageCell is one counter of an account's day: kind and name, as
// store.UsageCount holds them.
type usageCell struct {
	kind, name string
	n          int64
}

// usageCells are an account's counters of one day: a handful (the
// capabilities, surfaces and gate statuses it used), so a counter is found
// by a scan, and a call costs one map lookup, by account and day, however
// many counters it moves.
type usageCells struct{ cells []usageCell }

// usageDay is t's UTC day as an accountDay holds it.
func usageDay(t time.Time) int64 { return t.Unix() / 86400 }

// usageDayString is d as domain.QuotaDay writes it.
func usageDayString(d int64) string { return time.Unix(d*86400, 0).UTC().Format(time.DateOnly) }

type meter struct {
	mu     sync.Mutex
	counts map[accountDay]*usageCells
	cells  int // counters held, bounded by maxMeterKeys
	full   chan struct{}
	// flushMu makes flushes one at a time, so a flush and a read of the
	// pending counts never see a batch twice or not at all.
	flushMu sync.Mutex
}

func newMeter() *meter {
	return &meter{counts: make(map[accountDay]*usageCells), full: make(chan struct{}, 1)}
}

// cellsLocked is k's counters, added when k has none; m.mu is held.
func (m *meter) cellsLocked(k accountDay) *usageCells {
	c := m.counts[k]
	if c == nil {
		c = &usageCells{}
		m.counts[k] = c
	}
	return c
}

// addLocked adds n to c's counter kind/name; m.mu is held.
func (m *meter) addLocked(c *usageCells, kind, name string, n int64) {
	for i := range c.cells {
		if cell := &c.cells[i]; cell.name == name && cell.kind == kind {
			cell.n += n
			return
		}
	}
	c.cells = append(c.cells, usageCell{kind, name, n})
	m.cells++
}

func (m *meter) add(k accountDay, kind, name string, n int64) {
	m.mu.Lock()
	m.addLocked(m.cellsLocked(k), kind, name, n)
	m.unlockWakingWhenFull()
}

// unlockWakingWhenFull releases m.mu, waking the flusher early when the
// counters reached their bound.
func (m *meter) unlockWakingWhenFull() {
	full := m.cells >= maxMeterKeys
	m.mu.Unlock()
	if full {
		select {
		case m.full <- struct{}{}:
		default:
		}
	}
}

// CountCall counts one credentialed call of userID to a route of capability
// (CapabilityNone for none) through surface.
func (a *App) CountCall(userID, capability, surface string) {
	k := accountDay{userID, usageDay(a.now())}
	m := a.meter
	m.mu.Lock()
	c := m.cellsLocked(k)
	m.addLocked(c, UsageCapability, capability, 1)
	m.addLocked(c, UsageSurface, surface, 1)
	m.unlockWakingWhenFull()
}

func (a *App) countGate(userID, status string) {
	metrics.GateDecisions.Inc(status)
	a.meter.add(accountDay{userID, usageDay(a.now())}, UsageGate, status, 1)
}

func (a *App) countUses(userID string, n int64) {
	a.meter.add(accountDay{userID, usageDay(a.now())}, UsageUses, "uses", n)
}

// FlushUsage adds the counts gathered since the last flush to the database,
// in one transaction. On failure the batch is dropped, never retried: a
// retry after a commit whose answer was lost would count it twice.
func (a *App) FlushUsage(ctx context.Context) error {
	m := a.meter
	m.flushMu.Lock()
	defer m.flushMu.Unlock()
	m.mu.Lock()
	batch, cells := m.counts, m.cells
	m.counts, m.cells = make(map[accountDay]*usageCells, len(batch)), 0
	m.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	counts := make([]store.UsageCount, 0, cells)
	for k, c := range batch {
		day := usageDayString(k.day)
		for _, cell := range c.cells {
			counts = append(counts, store.UsageCount{UserID: k.user, Day: day, Kind: cell.kind, Name: cell.name, Count: cell.n})
		}
	}
	// One order for every replica's batches, so that two flushes touching
	// the same rows never deadlock.
	slices.SortFunc(counts, func(x, y store.UsageCount) int {
		return cmp.Or(cmp.Compare(x.UserID, y.UserID), cmp.Compare(x.Day, y.Day), cmp.Compare(x.Kind, y.Kind), cmp.Compare(x.Name, y.Name))
	})
	err := a.w.Write(ctx, func(t *writer.Tx) error { return a.store.AddUsage(ctx, t.SQL(), counts) })
	if err != nil {
		a.log.Error("usage counts dropped: the flush failed", "counters", len(counts), "err", err)
	}
	return err
}

// pendingUsage is this replica's counts of userID not flushed yet, of kind.
func (a *App) pendingUsage(userID string, day int64, kind string) map[string]int64 {
	m := a.meter
	out := map[string]int64{}
	m.mu.Lock()
	defer m.mu.Unlock()
	if c := m.counts[accountDay{userID, day}]; c != nil {
		for _, cell := range c.cells {
			if cell.kind == kind {
				out[cell.name] += cell.n
			}
		}
	}
	return out
}

// runUsageFlusher flushes the meter every tick, and early when it is full,
// until ctx ends; then it flushes once more (shutdown; Loops.UsageFlush).
func (a *App) runUsageFlusher(ctx context.Context, tick Ticker) {
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			if err := a.FlushUsage(context.WithoutCancel(ctx)); err != nil {
				a.log.Error("the last usage flush failed", "err", err)
			}
			return
		case <-tick.C():
		case <-a.meter.full:
		}
		_ = a.FlushUsage(ctx) // logged inside
	}
}

// DashboardUsage answers the caller's account: the stored counts plus this
// replica's not yet flushed (another replica's unflushed counts, at most one
// flush interval, show once flushed).
func (a *App) DashboardUsage(ctx context.Context, p Principal) (api.Usage, error) {
	now := a.now().UTC()
	// Under the flush lock, no batch is between the meter and the database.
	a.meter.flushMu.Lock()
	defer a.meter.flushMu.Unlock()
	f, err := a.store.AccountFigures(ctx, p.UserID, now)
	if err != nil {
		return api.Usage{}, err
	}
	u, err := a.usageToday(ctx, p, now)
	if err != nil {
		return api.Usage{}, err
	}
	u.TreeSize, u.Proposals, u.Notifications = f.TreeSize, f.Proposals, f.Notifications
	u.Events.Total = f.EventsTotal
	u.Grants.Live, u.Grants.Expired, u.Grants.Revoked = f.GrantsLive, f.GrantsExpired, f.GrantsRevoked
	return u, nil
}

// UsageToday is DashboardUsage's figures of today alone (the quota, the
// gate's checks, the grants' uses, calls by capability and surface): the
// console's overview, which reads no count that grows with the account
// (its grants, proposals and notifications are their panels').
func (a *App) UsageToday(ctx context.Context, p Principal) (api.Usage, error) {
	a.meter.flushMu.Lock()
	defer a.meter.flushMu.Unlock()
	return a.usageToday(ctx, p, a.now().UTC())
}

// usageToday reads today's figures; the caller holds the flush lock.
func (a *App) usageToday(ctx context.Context, p Principal, now time.Time) (api.Usage, error) {
	day := domain.QuotaDay(now)
	today, err := a.store.QuotaUsed(ctx, nil, p.UserID, day)
	if err != nil {
		return api.Usage{}, err
	}
	u := api.Usage{Day: day, Events: api.UsageEvents{Today: today, QuotaLimit: int64(a.cfg.DailyEventQuota),
		QuotaRemaining: max(0, int64(a.cfg.DailyEventQuota)-today)}}
	read := func(kind string) (map[string]int64, error) {
		m, err := a.store.Usage(ctx, p.UserID, kind, day, day)
		if err != nil {
			return nil, err
		}
		for k, n := range a.pendingUsage(p.UserID, usageDay(now), kind) {
			m[k] += n
		}
		return m, nil
	}
	if u.Gate, err = read(UsageGate); err != nil {
		return api.Usage{}, err
	}
	uses, err := read(UsageUses)
	if err != nil {
		return api.Usage{}, err
	}
	u.Grants.UsesToday = uses["uses"]
	if u.CallsToday.ByCapability, err = read(UsageCapability); err != nil {
		return api.Usage{}, err
	}
	if u.CallsToday.BySurface, err = read(UsageSurface); err != nil {
		return api.Usage{}, err
	}
	return u, nil
}
