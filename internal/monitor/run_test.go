package monitor_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/monitor"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
)

// appSource reads the account's checkpoints from the App itself, the use
// cases GET /v1/chain/proof/consistency and the public key route call, so
// that the loop runs in a synctest bubble without sockets.
type appSource struct {
	a *app.App
	p app.Principal
}

func (s appSource) ServicePublicKey(context.Context) (ed25519.PublicKey, error) {
	return s.a.ServicePublicKey(), nil
}

func (s appSource) ConsistencyProof(ctx context.Context, first uint64, second *uint64) (*api.ConsistencyProof, error) {
	var sec *int64
	if second != nil {
		sec = new(int64(*second))
	}
	p, err := s.a.ConsistencyProof(ctx, s.p, int64(first), sec)
	return &p, err
}

func (s appSource) Blocks(ctx context.Context, cursor *int64, limit int) (*api.BlockPage, error) {
	var from int64
	if cursor != nil {
		from = *cursor
	}
	p, err := s.a.Blocks(ctx, s.p, from, limit)
	return &p, err
}

// Run polls on its interval (a ticker on synctest's clock): it pins, follows
// growth at the next tick, reports an alarm once however many ticks see it,
// and stops when its context ends.
func TestRunPollsAndReportsAnAlarmOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		// The App lives in the bubble: its write loop waits on the
		// bubble's contexts.
		synctest.Test(t, func(t *testing.T) {
			st := storetest.Open(t, dsn)
			a := apptest.New(t, st, apptest.Options{})
			ctx := context.Background()
			acct, _, err := a.CreateAccount(ctx, app.AccountRequest{NoEmail: true})
			if err != nil {
				t.Fatal(err)
			}
			p := app.Principal{UserID: acct.UserID, KeyID: "k", Kind: "api_key"}
			seq := 0
			appendN := func(n int) {
				t.Helper()
				for range n {
					id, typ := fmt.Sprintf("evt-run-%d", seq), "note"
					seq++
					if _, err := a.AppendNext(ctx, p, api.EventInput{EventID: &id, EventType: &typ}, "rest"); err != nil {
						t.Fatal(err)
					}
				}
			}
			appendN(2)
			state := filepath.Join(t.TempDir(), "monitor.json")

			type report struct {
				r   *monitor.Result
				err error
			}
			reports := make(chan report)
			m := &monitor.Monitor{Source: appSource{a, p}, StatePath: state, Interval: time.Minute,
				Options: monitor.Options{UserID: acct.UserID, Now: time.Now},
				Report:  func(r *monitor.Result, err error) { reports <- report{r, err} }}
			runCtx, stop := context.WithCancel(t.Context())
			done := make(chan error)
			go func() { done <- m.Run(runCtx) }()

			start := time.Now()
			next := func() report {
				t.Helper()
				r := <-reports
				if r.err != nil {
					t.Fatalf("poll: %v", r.err)
				}
				return r
			}
			if r := next(); r.r.Status != monitor.StatusPinned || r.r.Observed.TreeSize != 2 {
				t.Fatalf("first poll: %+v", r.r)
			}
			appendN(3)
			if r := next(); r.r.Status != monitor.StatusAdvanced || r.r.Observed.TreeSize != 5 || time.Since(start) != time.Minute {
				t.Fatalf("second poll (after %v): %+v", time.Since(start), r.r)
			}
			if s, err := monitor.ReadState(state); err != nil || s.Checkpoint.TreeSize != 5 {
				t.Fatalf("state after growth: %v %+v", err, s)
			}
			if r := next(); r.r.Status != monitor.StatusUnchanged {
				t.Fatalf("third poll: %+v", r.r)
			}
			// A second monitor of the same state file is refused while
			// this one runs: two could write an older pin over a newer.
			second := &monitor.Monitor{Source: appSource{a, p}, StatePath: state, Options: m.Options}
			if _, err := second.Once(ctx); !errors.Is(err, monitor.ErrStateInUse) {
				t.Fatalf("a second monitor of the state file while Run holds it: %v, want ErrStateInUse", err)
			}

			// The newest block's signature is tampered with in the store:
			// a bad signature, reported once however many ticks see it.
			appendN(1)
			b, _, err := a.Seal(ctx, acct.UserID)
			if err != nil {
				t.Fatal(err)
			}
			note := append([]byte(nil), b.Note...)
			i := len(note) - 10 // a character of the Ed25519 signature
			if note[i] == 'A' {
				note[i] = 'B'
			} else {
				note[i] = 'A'
			}
			if _, err := st.WriteDB().Exec(`UPDATE chain_blocks SET note = $1 WHERE user_id = $2 AND block_index = $3`, note, acct.UserID, b.Index); err != nil {
				t.Fatal(err)
			}
			r := next()
			if r.r.Alarm == nil || r.r.Alarm.Kind != monitor.KindBadSignature || r.r.Alarm.Pinned.TreeSize != 5 || r.r.Alarm.Observed.Note != string(note) {
				t.Fatalf("tampered: %+v", r.r)
			}
			time.Sleep(5 * time.Minute)
			synctest.Wait()
			select {
			case r := <-reports:
				t.Fatalf("the same alarm reported again: %+v %v", r.r, r.err)
			default:
			}
			if s, err := monitor.ReadState(state); err != nil || s.Checkpoint.TreeSize != 5 {
				t.Fatalf("the alarm moved the pin: %v %+v", err, s)
			}
			stop()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if r, err := second.Once(ctx); err != nil || r.Alarm == nil {
				t.Fatalf("once Run has stopped, the state file is free: %+v, %v", r, err)
			}
		})
	})
}
