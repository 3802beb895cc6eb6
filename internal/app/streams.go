package app

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/auditchain/auditchain/internal/app/writer"
	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store"
)

// Open event streams are counted in the store, one lease per stream, so the
// caps hold across replicas (docs/decisions/strict-input.md "Streams and
// keys"): each key (or session) holds at most the hub's MaxPerKey, each
// account --max-streams-per-account. A replica renews its leases every
// streamLeaseRenew while it holds any; a vanished replica's leases lapse
// after streamLeaseTTL, and their slots are free again.
const (
	streamLeaseTTL   = 90 * time.Second
	streamLeaseRenew = 30 * time.Second
)

// CodeTooManyStreams answers a stream over a cap (429): `per` says which
// ("key" or "account"), `limit` the cap.
const CodeTooManyStreams = "too_many_streams"

// streamLeases is this replica's side of the leases.
type streamLeases struct {
	mu      sync.Mutex
	held    int
	renewer bool
	stop    chan struct{}
	once    sync.Once
}

// TakeStreamSlot takes one of the account's stream slots for a stream of p,
// or answers 429 too_many_streams. The caller must call release when the
// stream ends.
func (a *App) TakeStreamSlot(ctx context.Context, p Principal) (release func(), err error) {
	id, err := a.newID("sl-", 12)
	if err != nil {
		return nil, err
	}
	now := a.now()
	l := store.StreamLease{LeaseID: id, UserID: p.UserID, Identity: p.Identity(), Replica: a.replicaID(),
		ExpiresAt: now.Add(streamLeaseTTL).UnixMicro()}
	perKey, perAccount := a.hub.MaxPerKey(), cmp.Or(a.cfg.MaxStreams, config.DefaultMaxStreams)
	var refused string
	err = a.w.Write(ctx, func(t *writer.Tx) error {
		if _, err := t.Lock(ctx, p.UserID); err != nil {
			return err
		}
		var err error
		refused, err = a.store.TakeStreamLease(ctx, t.SQL(), l, now.UnixMicro(), perAccount, perKey)
		return err
	})
	if err != nil {
		return nil, err
	}
	if refused != "" {
		limit := perAccount
		if refused == "key" {
			limit = perKey
		}
		return nil, domain.Errorf(CodeTooManyStreams, "this %s already holds its %d open streams; close one first", refused, limit).
			With("limit", limit).With("per", refused)
	}
	a.leaseHeld(1)
	var once sync.Once
	return func() {
		once.Do(func() {
			a.leaseHeld(-1)
			// Whatever happened to the request: the lease lapses anyway if
			// this write fails.
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := a.w.Write(ctx, func(t *writer.Tx) error { return a.store.DropStreamLease(ctx, t.SQL(), id) }); err != nil {
				a.log.Warn("dropping a stream lease failed; it lapses on its own", "err", err)
			}
		})
	}, nil
}

// leaseHeld counts this replica's leases and starts the renewer with the
// first one.
func (a *App) leaseHeld(d int) {
	l := &a.leases
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held += d
	if !l.renewer {
		l.renewer = true
		l.stop = make(chan struct{})
		go a.renewStreamLeases(l.stop)
	}
}

// renewStreamLeases extends this replica's leases while it holds any, until
// stop closes.
func (a *App) renewStreamLeases(stop <-chan struct{}) {
	tick := time.NewTicker(streamLeaseRenew)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := a.RenewStreamLeases(ctx); err != nil {
			a.log.Warn("renewing stream leases failed", "err", fmt.Sprint(err))
		}
		cancel()
	}
}

// RenewStreamLeases extends the leases of this replica's open streams by
// the lease's lifetime from now; the renewer calls it every
// streamLeaseRenew.
func (a *App) RenewStreamLeases(ctx context.Context) error {
	a.leases.mu.Lock()
	held := a.leases.held
	a.leases.mu.Unlock()
	if held == 0 {
		return nil
	}
	until := a.now().Add(streamLeaseTTL).UnixMicro()
	return a.w.Write(ctx, func(t *writer.Tx) error { return a.store.RenewStreamLeases(ctx, t.SQL(), a.replicaID(), until) })
}

// stopStreamLeases ends the renewer (App.Close).
func (a *App) stopStreamLeases() {
	l := &a.leases
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.renewer {
		l.once.Do(func() { close(l.stop) })
	}
}
