package app_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
)

// A machine's events are checked against its current signing key even when
// this replica last saw the machine under another key, or none: the key a
// replica keeps in memory is valid only at the signing keys generation it
// was read at (app/signing_keys.go), and a registration moves the
// generation on. Each step's first append runs with the replica's kept key
// out of date. On PostgreSQL the registrations are made by a second replica
// over the same database, as an operator's scale-out runs them; on SQLite
// (one process) by the same App, which keeps nothing on a registration.
func TestSignaturesFollowTheMachinesCurrentKey(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		appender := apptest.New(t, storetest.Open(t, dsn), apptest.Options{})
		registrar := appender
		if strings.HasPrefix(dsn, "postgres") {
			registrar = apptest.New(t, storetest.Open(t, dsn), apptest.Options{})
		}
		acct, _, err := appender.CreateAccount(ctx, app.AccountRequest{Email: "keys-gen@example.com"})
		if err != nil {
			t.Fatal(err)
		}
		p := app.Principal{UserID: acct.UserID, KeyID: "k", Kind: "api_key"}
		n := 0
		// appendAs appends at the tip an event of machine with raw {"n": …},
		// signed by key when it is not nil, through Append (the client
		// numbers it) or AppendNext (the service does), in turn.
		appendAs := func(machine string, key ed25519.PrivateKey) error {
			t.Helper()
			n++
			id, typ, raw := fmt.Sprintf("evt-%d", n), "tool_call", json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))
			in := api.EventInput{EventID: &id, EventType: &typ, Raw: raw, MachineID: &machine}
			if key != nil {
				sig := base64.StdEncoding.EncodeToString(ed25519.Sign(key, raw))
				in.Signature = &sig
			}
			if n%2 == 0 {
				_, err := appender.AppendNext(ctx, p, in, "rest")
				return err
			}
			tip, err := appender.ChainTip(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			seq := int64(0)
			if tip.Sequence != nil {
				seq = *tip.Sequence + 1
			}
			in.Sequence, in.PrevHash = &seq, tip.PayloadHash
			_, err = appender.Append(ctx, p, in, "rest")
			return err
		}
		register := func(machine string, key ed25519.PrivateKey) {
			t.Helper()
			pub := base64.StdEncoding.EncodeToString(key.Public().(ed25519.PublicKey))
			if _, err := registrar.RegisterSigningKey(ctx, p, machine, pub); err != nil {
				t.Fatal(err)
			}
		}
		refused := func(step string, err error) {
			t.Helper()
			var de *domain.Error
			if !errors.As(err, &de) || de.Code != domain.CodeSignatureInvalid {
				t.Errorf("%s: got %v, want %s", step, err, domain.CodeSignatureInvalid)
			}
		}
		stored := func(step string, err error) {
			t.Helper()
			if err != nil {
				t.Errorf("%s: %v", step, err)
			}
		}
		first := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
		second := ed25519.NewKeyFromSeed([]byte("0123456789abcdef0123456789abcdef"))

		stored("m1 without a key, unsigned", appendAs("m1", nil))
		stored("m1 without a key, unsigned, again", appendAs("m1", nil))
		register("m1", first)
		refused("m1 unsigned after its first key", appendAs("m1", nil))
		refused("m1 unsigned after its first key, again", appendAs("m1", nil))
		refused("m1 signed by another key", appendAs("m1", second))
		stored("m1 signed by its key", appendAs("m1", first))
		stored("m1 signed by its key, again", appendAs("m1", first))
		stored("m2 without a key, after m1's", appendAs("m2", nil))

		register("m1", second) // rotation
		stored("m1 signed by its new key at once", appendAs("m1", second))
		refused("m1 signed by its replaced key", appendAs("m1", first))
		register("m1", first) // and back
		refused("m1 signed by its replaced key at once", appendAs("m1", second))
		refused("m1 signed by its replaced key, again", appendAs("m1", second))
		stored("m1 signed by its new key", appendAs("m1", first))
		stored("m1 signed by its new key, again", appendAs("m1", first))

		register("m2", second) // another machine's key moves the generation too
		refused("m2 unsigned after its key", appendAs("m2", nil))
		stored("m2 signed by its key", appendAs("m2", second))
		stored("m1 still signed by its key", appendAs("m1", first))
		refused("m1 still refuses its replaced key", appendAs("m1", second))
		register("m2", first)
		stored("m2 signed by its new key at once", appendAs("m2", first))
	})
}
