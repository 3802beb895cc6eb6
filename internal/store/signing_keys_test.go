package store_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

// Every registration of a signing key moves the account's signing keys
// generation on, in its transaction (a rolled back one leaves it), and
// SigningKeyAtGen reads a machine's current key with the generation it is
// current at: an account never seen has no key, at a generation not known
// (0); its first locked head is at the first generation (1).
func TestSigningKeysGenerationMovesWithEachRegistration(t *testing.T) {
	storetest.EachStore(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		check := func(step string, machine string, wantFound bool, wantFingerprint string, wantGen int64) {
			t.Helper()
			k, found, gen, err := s.SigningKeyAtGen(ctx, "u1", machine)
			if err != nil || found != wantFound || k.Fingerprint != wantFingerprint || gen != wantGen {
				t.Errorf("%s: %s's key %q (found %v) at generation %d, %v; want %q (found %v) at %d",
					step, machine, k.Fingerprint, found, gen, err, wantFingerprint, wantFound, wantGen)
			}
			var locked int64
			if err := s.InTx(ctx, func(tx *sql.Tx) error {
				h, _, err := s.LockHeadRules(ctx, tx, "u1")
				locked = h.SigningKeysGen
				return err
			}); err != nil || locked != wantGen {
				t.Errorf("%s: the locked head's generation is %d, %v; want %d", step, locked, err, wantGen)
			}
		}
		errRolledBack := errors.New("rolled back on purpose")
		register := func(machine, fingerprint string, fromLeaf int64, commit bool) {
			t.Helper()
			err := s.InTx(ctx, func(tx *sql.Tx) error {
				if _, err := s.LockHead(ctx, tx, "u1"); err != nil {
					return err
				}
				k := store.SigningKey{UserID: "u1", MachineID: machine, FromLeaf: fromLeaf, PublicKey: "pk-" + fingerprint,
					Fingerprint: fingerprint, RegisteredAt: 1}
				if err := s.InsertSigningKey(ctx, tx, k, "key-1"); err != nil {
					return err
				}
				if !commit {
					return errRolledBack
				}
				return nil
			})
			if err != nil && (commit || !errors.Is(err, errRolledBack)) {
				t.Fatal(err)
			}
		}

		if k, found, gen, err := s.SigningKeyAtGen(ctx, "u1", "m1"); err != nil || found || gen != 0 {
			t.Errorf("never seen: key %+v (found %v) at generation %d, %v; want none at 0", k, found, gen, err)
		}
		if err := s.InTx(ctx, func(tx *sql.Tx) error { _, err := s.LockHead(ctx, tx, "u1"); return err }); err != nil {
			t.Fatal(err)
		}
		check("its head made", "m1", false, "", 1)
		register("m1", "fp-a", 0, true)
		check("first key", "m1", true, "fp-a", 2)
		check("another machine", "m2", false, "", 2)
		register("m1", "fp-b", 5, false)
		check("a rotation rolled back", "m1", true, "fp-a", 2)
		register("m1", "fp-b", 5, true)
		check("rotated", "m1", true, "fp-b", 3)
		register("m1", "fp-c", 5, true) // the same leaf: replaces the key
		check("replaced at its leaf", "m1", true, "fp-c", 4)
		register("m2", "fp-d", 7, true)
		check("another machine's key", "m1", true, "fp-c", 5)
		check("that machine", "m2", true, "fp-d", 5)
	})
}
