package httpapi_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

// op is one client operation of the history: what was sent and how it ended.
type op struct {
	account string
	eventID string
	outcome string // ok, fail (a definite refusal), unknown (5xx or transport error)
	hash    string // payload_hash acknowledged on ok
}

// runHistory has clients append to accounts through the given replicas,
// retrying on 409 from the tip the answer names, then checks the stored chains
// like a Jepsen checker: no acknowledged write lost or altered, no duplicates,
// contiguous sequences, intact links, nothing stored that no client sent.
func runHistory(t *testing.T, replicas []*env, accounts, clientsPerAccount, eventsPerClient int) {
	t.Helper()
	keys := make([]string, accounts)
	users := make([]string, accounts)
	for i := range keys {
		users[i], keys[i] = replicas[0].account(fmt.Sprintf("h%d@example.com", i))
	}
	var mu sync.Mutex
	var history []op
	record := func(o op) { mu.Lock(); history = append(history, o); mu.Unlock() }

	var wg sync.WaitGroup
	for a := 0; a < accounts; a++ {
		for c := 0; c < clientsPerAccount; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(a), uint64(c)))
				for n := 0; n < eventsPerClient; n++ {
					id := fmt.Sprintf("evt-a%d-c%d-n%d", a, c, n)
					for attempt := 0; ; attempt++ {
						e := replicas[rng.IntN(len(replicas))]
						tip := e.tip(keys[a])
						seq := int64(0)
						if s, ok := tip["sequence"].(float64); ok {
							seq = int64(s) + 1
						}
						r := e.do("POST", "/v1/events", keys[a], ev(id, seq, tip["payload_hash"], "raw", map[string]any{"n": n, "c": c}))
						switch {
						case r.Status == 200:
							record(op{account: users[a], eventID: id, outcome: "ok", hash: hashOf(r.JSON(t))})
						case r.Status == 409 && attempt < 1000:
							continue // lost the race for this sequence: retry at the new tip
						case r.Status >= 500:
							record(op{account: users[a], eventID: id, outcome: "unknown"})
						default:
							record(op{account: users[a], eventID: id, outcome: "fail"})
							t.Errorf("append %s: %d %s", id, r.Status, r.Body)
						}
						break
					}
				}
			}()
		}
	}
	wg.Wait()

	sent := map[string]op{}
	for _, o := range history {
		sent[o.eventID] = o
	}
	st := replicas[0].store
	for ai, user := range users {
		seen := map[string]bool{}
		var prev *store.Event
		count := 0
		err := st.EventsFrom(context.Background(), user, 0, func(e *store.Event) error {
			if seen[e.EventID] {
				return fmt.Errorf("duplicate event_id %s", e.EventID)
			}
			seen[e.EventID] = true
			o, ok := sent[e.EventID]
			if !ok {
				return fmt.Errorf("stored %s, which no client sent to account %d", e.EventID, ai)
			}
			if o.outcome == "ok" && o.hash != e.PayloadHash {
				return fmt.Errorf("%s acknowledged with %s, stored %s", e.EventID, o.hash, e.PayloadHash)
			}
			if e.Sequence != int64(count) || e.LeafIndex != int64(count) {
				return fmt.Errorf("sequence %d / leaf %d at position %d", e.Sequence, e.LeafIndex, count)
			}
			switch {
			case prev == nil && e.PrevHash != nil:
				return fmt.Errorf("genesis %s has prev_hash", e.EventID)
			case prev != nil && (e.PrevHash == nil || *e.PrevHash != prev.PayloadHash):
				return fmt.Errorf("%s does not link to %s", e.EventID, prev.EventID)
			}
			cp := *e
			prev = &cp
			count++
			return nil
		})
		if err != nil {
			t.Fatalf("account %d: %v", ai, err)
		}
		for id, o := range sent {
			if o.account == user && o.outcome == "ok" && !seen[id] {
				t.Fatalf("acknowledged %s is lost", id)
			}
		}
		if count != clientsPerAccount*eventsPerClient {
			t.Fatalf("account %d holds %d events, want %d", ai, count, clientsPerAccount*eventsPerClient)
		}
	}
}

func TestHistoryCheckerSQLite(t *testing.T) {
	e := newEnv(t, storetest.DSN(t, storetest.SQLite), func(c *config.Config) { c.DailyEventQuota = 1 << 30 })
	runHistory(t, []*env{e}, 4, 4, 25)
}

func TestHistoryCheckerTwoPostgresReplicas(t *testing.T) {
	dsn := storetest.DSN(t, storetest.Postgres)
	big := func(c *config.Config) { c.DailyEventQuota = 1 << 30 }
	runHistory(t, []*env{newEnv(t, dsn, big), newEnv(t, dsn, big)}, 4, 4, 25)
}

// Of many concurrent appends with the same sequence exactly one is stored; the
// rest get 409 naming the expected prev_hash.
func TestSameSequenceRace(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		replicas := []*env{newEnv(t, dsn, nil)}
		if dsn[:8] == "postgres" {
			replicas = append(replicas, newEnv(t, dsn, nil), newEnv(t, dsn, nil))
		}
		_, key := replicas[0].account("race@example.com")
		h0 := hashOf(replicas[0].appendOK(key, ev("evt-0", 0, nil)))
		const n = 200
		statuses := make([]int, n)
		bodies := make([]map[string]any, n)
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := replicas[i%len(replicas)].do("POST", "/v1/events", key, ev(fmt.Sprintf("evt-r%d", i), 1, h0))
				statuses[i], bodies[i] = r.Status, r.JSON(t)
			}()
		}
		wg.Wait()
		winners := 0
		var winnerHash string
		for i, s := range statuses {
			if s == 200 {
				winners++
				winnerHash = hashOf(bodies[i])
			}
		}
		if winners != 1 {
			t.Fatalf("%d appends of sequence 1 succeeded", winners)
		}
		for i, s := range statuses {
			if s == 200 {
				continue
			}
			if s != 409 || bodies[i]["code"] != "prev_hash_mismatch" || bodies[i]["expected_prev_hash"] != winnerHash {
				t.Fatalf("loser answered %d %v", s, bodies[i])
			}
		}
		if tip := replicas[0].tip(key); tip["event_count"] != float64(2) {
			t.Fatalf("tip %v", tip)
		}
	})
}
