package app

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// The attempt gate's rules, over seeded random runs of acquires and
// releases by accounts that hold many slots and accounts that hold few: the
// attempts in flight never pass attemptSlots, nor one account's
// accountAttempts; an account with none in flight is refused only when
// every slot is taken, and then at least reservedSlots other accounts have
// attempts in flight (which is why a few accounts' hanging receivers cannot
// hold back another account's first attempt); and a release wakes the
// refused.
func TestAttemptGateKeepsSlotsForFirstAttempts(t *testing.T) {
	firstRefused, moreRefused := 0, 0
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 34))
		var g attemptGate
		held, total := map[string]int{}, 0
		accounts, releases := 20+r.IntN(1000), 0.05+0.35*r.Float64()
		names := make([]string, accounts)
		for i := range names {
			names[i] = fmt.Sprintf("acct-%d", i)
		}
		for step := range 20_000 {
			acct := names[r.IntN(accounts)]
			if r.Float64() < releases && held[acct] > 0 {
				g.release(acct)
				held[acct]--
				total--
				continue
			}
			ok, freed := g.acquire(acct)
			if !ok {
				if held[acct] > 0 {
					moreRefused++
				} else {
					firstRefused++
					others := 0
					for _, n := range held {
						if n > 0 {
							others++
						}
					}
					if total < attemptSlots || others < reservedSlots {
						t.Fatalf("seed %d step %d: %s, with nothing in flight, refused while %d slots are taken by %d accounts",
							seed, step, acct, total, others)
					}
				}
				// Any release wakes the refused caller.
				var other string // the first account holding a slot, so runs repeat by seed
				for _, a := range names {
					if held[a] > 0 {
						other = a
						break
					}
				}
				if other == "" {
					t.Fatalf("seed %d step %d: refused with nothing in flight", seed, step)
				}
				g.release(other)
				held[other]--
				total--
				select {
				case <-freed:
				default:
					t.Fatalf("seed %d step %d: a release did not wake the refused caller", seed, step)
				}
				continue
			}
			held[acct]++
			total++
			if total > attemptSlots || held[acct] > accountAttempts {
				t.Fatalf("seed %d step %d: %d attempts in flight, %d of them %s's", seed, step, total, held[acct], acct)
			}
		}
	}
	if firstRefused == 0 || moreRefused == 0 {
		t.Fatalf("the runs refused %d first attempts and %d further ones: both cases must occur", firstRefused, moreRefused)
	}
	t.Logf("refused: %d first attempts, %d further ones", firstRefused, moreRefused)
}
