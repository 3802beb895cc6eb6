package main

// `auditchain admin check` and `auditchain admin pin` (docs/operations.md
// "Verify a store" and "Pinned state"), and serve's --pin-state.

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/durable"
	"github.com/auditchain/auditchain/internal/merkle"
	"github.com/auditchain/auditchain/internal/pinstate"
	"github.com/auditchain/auditchain/internal/progress"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/verify"
)

const checkUsage = `usage: auditchain admin check [--pin-state FILE] [--service-key-file FILE] [--witness URL=VKEY ...] [--witness-quorum N] [--strict] [--json] [--quiet] [--db DSN]

Checks every account of the store, reading only: each event's payload_hash
recomputed from its stored fields, the prev_hash links and sequence gaps, the
Merkle root of the events against the stored tree and against the newest
signed block (its signature verified with the service key), and, with
--pin-state, that the store holds each pinned account's block and tree
(nothing rolled back). With --witness keys (serve's, or just the verifier
keys; $AUDITCHAIN_WITNESS as serve reads it), the witnesses' cosignatures on
each newest block: ok (--witness-quorum of them verify), none (fewer: not yet
cosigned), mismatch (a stored cosignature that does not verify, a witness
that cosigned another root at a size, or holds more than the newest block);
without, witnesses is not_configured.

One line per account (--json: a report); exits 1 when any account does not
match. Breaks, gaps and event signature failures are what POST
/v1/heal/scan reports: listed, and a mismatch only with --strict.
`

const pinUsage = `usage: auditchain admin pin --to FILE [--force] [--service-key-file FILE] [--quiet] [--db DSN]

Seals every account's chain up to its tip, then writes the pinned state:
each account's newest block (index, tree size, root hash, block hash), signed
with the service key. Give it to "admin check --pin-state" and "serve
--pin-state" after a restore: an account the restore rolled back is reported,
and serve refuses to start. An existing FILE is replaced only with --force.
`

// accountCheck is one account in admin check's report.
type accountCheck struct {
	UserID  string  `json:"user_id"`
	Email   *string `json:"email"`
	Present bool    `json:"present"` // false: pinned, but not in the store
	Events  int64   `json:"events"`
	// NewestBlock is the newest signed block (nil: none sealed yet);
	// UnsealedEvents the events appended after it, which no block signs yet.
	NewestBlock      *checkedBlock `json:"newest_block"`
	UnsealedEvents   int64         `json:"unsealed_events"`
	MerkleRoot       string        `json:"merkle_root"` // ok or mismatch (heal scan's merkle_root_status)
	MerkleRootDetail *string       `json:"merkle_root_detail"`
	Breaks           int           `json:"breaks"`
	Gaps             int           `json:"gaps"`
	SignatureFails   int           `json:"signature_failures"`
	Witnesses        string        `json:"witnesses"` // see checkWitnesses
	WitnessDetail    *string       `json:"witness_detail"`
	// Pin is pinstate's status (ok, missing, rolled_back, diverged) or
	// not_pinned; nil without --pin-state.
	Pin       *string `json:"pin"`
	PinDetail *string `json:"pin_detail"`
	OK        bool    `json:"ok"`
}

type checkedBlock struct {
	Index    int64  `json:"index"`
	TreeSize uint64 `json:"tree_size"`
	RootHash string `json:"root_hash"`
}

// checkReport is admin check --json.
type checkReport struct {
	Store        string         `json:"store"`
	ServiceKeyID string         `json:"service_key_id"`
	PinState     *pinSummary    `json:"pin_state"`
	Accounts     []accountCheck `json:"accounts"`
	Mismatches   int            `json:"mismatches"`
	OK           bool           `json:"ok"`
}

type pinSummary struct {
	File     string `json:"file"`
	PinnedAt string `json:"pinned_at"`
	Accounts int    `json:"accounts"`
}

// Witness states of an account's newest block (docs/integrity.md
// "Witnesses"), from the cosignatures and witness rows the store holds,
// checked against the witness keys given (--witness, as serve takes it):
//   - ok: at least --witness-quorum valid cosignatures on the newest block;
//   - none: fewer (the witness job has not caught up, or the witnesses are
//     down): nothing wrong, the detail names who is missing;
//   - mismatch (fails the check): a stored cosignature that does not verify
//     under its witness's key, a witness that cosigned a root at a size
//     where this store's tree has another (a fork), or a witness that holds
//     more of the log than the newest block (a rollback);
//   - not_configured: no --witness key given, nothing checked.
const (
	witnessesOK            = "ok"
	witnessesNone          = "none"
	witnessesMismatch      = "mismatch"
	witnessesNotConfigured = "not_configured"
)

// witnessKeys are admin check's --witness keys and quorum.
type witnessKeys struct {
	ws     []verify.Witness
	quorum int
}

// checkWitnesses checks the witnesses' cosignatures on the account's newest
// block b and the witness rows against the store's own tree.
func checkWitnesses(ctx context.Context, a *adminApp, userID string, b store.BlockRow, keys witnessKeys) (string, *string, error) {
	if len(keys.ws) == 0 {
		return witnessesNotConfigured, nil, nil
	}
	detail := func(format string, args ...any) *string { s := fmt.Sprintf(format, args...); return &s }
	cosigs, err := a.Store.Cosignatures(ctx, userID, b.Index, b.Index)
	if err != nil {
		return "", nil, err
	}
	states, err := a.Store.WitnessStates(ctx, nil, userID)
	if err != nil {
		return "", nil, err
	}
	var lines []string
	for _, c := range cosigs[b.Index] {
		for _, w := range keys.ws {
			if w.Name != c.Witness {
				continue
			}
			if err := w.VerifyCosignature(b.Note, c.Signature); err != nil {
				return witnessesMismatch, detail("the stored cosignature of %s on block %d: %v", w.Name, b.Index, err), nil
			}
			lines = append(lines, c.Signature)
		}
	}
	r := a.Store.HashReader(ctx, nil, userID)
	for _, w := range keys.ws {
		st, ok := states[w.Name]
		if !ok {
			continue
		}
		if st.WitnessSize > int64(b.Size) {
			return witnessesMismatch, detail("%s holds size %d of this log, beyond its newest block (size %d): rolled back or forked", w.Name, st.WitnessSize, b.Size), nil
		}
		if st.CosignedSize > 0 && st.CosignedSize <= int64(b.Size) {
			root, err := merkle.Root(st.CosignedSize, r)
			if err != nil {
				return "", nil, err
			}
			if !bytes.Equal(root[:], st.CosignedRoot) {
				return witnessesMismatch, detail("%s cosigned another root at size %d than this store's tree has: a fork", w.Name, st.CosignedSize), nil
			}
		}
	}
	q := verify.CheckQuorum(b.Note, lines, keys.ws, keys.quorum)
	if !q.Met() {
		return witnessesNone, detail("%d of %d required cosignatures on block %d (missing: %s)", len(q.Cosigned), q.Required, b.Index, strings.Join(q.Missing, ", ")), nil
	}
	return witnessesOK, nil, nil
}

// witnessFlags are admin check's --witness (URL=VKEY as serve takes it, or
// a bare VKEY; repeatable; $AUDITCHAIN_WITNESS as serve reads it) and
// --witness-quorum.
func (e adminEnv) witnessFlags(fs *flag.FlagSet) func() (witnessKeys, error) {
	var specs multiFlag
	fs.Var(&specs, "witness", "a witness's URL=VKEY (as serve takes it) or VKEY, repeatable: check its cosignatures (env AUDITCHAIN_WITNESS)")
	quorum := fs.Int("witness-quorum", 0, "cosignatures the newest block needs (default: every --witness)")
	return func() (witnessKeys, error) {
		if len(specs) == 0 && e.getenv("AUDITCHAIN_WITNESS") != "" {
			specs = strings.FieldsFunc(e.getenv("AUDITCHAIN_WITNESS"), func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
		}
		var keys witnessKeys
		for _, spec := range specs {
			vkey := spec
			if w, err := config.ParseWitness(spec); err == nil {
				vkey = w.VKey
			}
			w, err := verify.NewWitness(vkey)
			if err != nil {
				return keys, usagef("admin check: --witness: %v", err)
			}
			keys.ws = append(keys.ws, w)
		}
		keys.quorum = *quorum
		if keys.quorum == 0 {
			keys.quorum = len(keys.ws)
		}
		if len(keys.ws) > 0 && (keys.quorum < 1 || keys.quorum > len(keys.ws)) {
			return keys, usagef("admin check: --witness-quorum must be between 1 and the %d --witness keys", len(keys.ws))
		}
		return keys, nil
	}
}

const pinNotPinned = "not_pinned"

func (e adminEnv) check(args []string) error {
	fs, open := e.newAdmin("check", checkUsage)
	pinFile := fs.String("pin-state", "", "pinned state file (from admin pin) the store must hold")
	keyFile := e.serviceKeyFlag(fs)
	strict := fs.Bool("strict", false, "count breaks, gaps and event signature failures as mismatches")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	quiet := fs.Bool("quiet", false, "no progress line on stderr")
	witnesses := e.witnessFlags(fs)
	if err := e.noArgs(fs, args); err != nil {
		return err
	}
	keys, err := witnesses()
	if err != nil {
		return err
	}
	a, closeStore, err := withServiceKey(e.ctx, open, *keyFile)
	if err != nil {
		return err
	}
	defer closeStore()
	rep := checkReport{Store: a.Store.Location, ServiceKeyID: a.ServiceKeyID(), Accounts: []accountCheck{}}
	pins := map[string]pinstate.Result{}
	if *pinFile != "" {
		state, results, err := comparePin(e.ctx, a.Store, a.ServicePublicKey(), *pinFile)
		if err != nil {
			return err
		}
		rep.PinState = &pinSummary{File: *pinFile, PinnedAt: state.PinnedAt.Format(time.RFC3339), Accounts: len(state.Accounts)}
		for _, r := range results {
			pins[r.Pinned.UserID] = r
		}
	}
	line := progress.Start(e.stderr, progress.IsTerminal(e.stderr) && !*quiet,
		progress.Options{Label: "auditchain admin check", Unit: "accounts checked"})
	err = eachAccount(e.ctx, a.Store, func(acct store.AccountSummary) error {
		defer line.Add(1)
		c, err := checkAccount(e.ctx, a, acct, keys)
		if err != nil {
			return fmt.Errorf("account %s: %w", acct.UserID, err)
		}
		if *pinFile != "" {
			status := pinNotPinned
			if r, ok := pins[acct.UserID]; ok {
				status = r.Status
				if r.Detail != "" {
					c.PinDetail = &r.Detail
				}
				delete(pins, acct.UserID)
			}
			c.Pin = &status
		}
		rep.Accounts = append(rep.Accounts, c)
		return nil
	})
	line.Done()
	if err != nil {
		return err
	}
	gone := witnessesNone // a pinned account no longer in the store has nothing cosigned
	if len(keys.ws) == 0 {
		gone = witnessesNotConfigured
	}
	for _, r := range pins { // pinned, but no longer in the store
		status, detail := r.Status, r.Detail
		rep.Accounts = append(rep.Accounts, accountCheck{UserID: r.Pinned.UserID, MerkleRoot: app.RootOK, Witnesses: gone, Pin: &status, PinDetail: &detail})
	}
	for i := range rep.Accounts {
		c := &rep.Accounts[i]
		c.OK = c.MerkleRoot == app.RootOK && c.Witnesses != witnessesMismatch && (c.Pin == nil || *c.Pin == pinstate.StatusOK || *c.Pin == pinNotPinned) &&
			(!*strict || c.Breaks+c.Gaps+c.SignatureFails == 0)
		if !c.OK {
			rep.Mismatches++
		}
	}
	rep.OK = rep.Mismatches == 0
	if *asJSON {
		err = printJSON(e.stdout, rep)
	} else {
		err = printCheck(e.stdout, rep)
	}
	if err != nil {
		return err
	}
	if !rep.OK {
		return fmt.Errorf("admin check: %d of %d accounts do not match (see the report)", rep.Mismatches, len(rep.Accounts))
	}
	return nil
}

// checkAccount is one account's check: the heal scan (which writes nothing)
// and the newest block.
func checkAccount(ctx context.Context, a *adminApp, acct store.AccountSummary, keys witnessKeys) (accountCheck, error) {
	c := accountCheck{UserID: acct.UserID, Email: acct.Email, Present: true, Events: acct.EventCount, UnsealedEvents: acct.EventCount}
	scan, err := a.HealScan(ctx, app.Principal{UserID: acct.UserID}, nil)
	if err != nil {
		return c, err
	}
	c.MerkleRoot, c.MerkleRootDetail = scan.MerkleRootStatus, scan.MerkleRootDetail
	c.Breaks, c.Gaps, c.SignatureFails = len(scan.Breaks), len(scan.Gaps), len(scan.SignatureFailures)
	c.Witnesses = witnessesNone
	if len(keys.ws) == 0 {
		c.Witnesses = witnessesNotConfigured
	}
	b, err := a.Store.LastBlock(ctx, nil, acct.UserID)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return c, err
	default:
		c.NewestBlock = &checkedBlock{Index: b.Index, TreeSize: b.Size, RootHash: b.Root.String()}
		c.UnsealedEvents = max(acct.EventCount-int64(b.Size), 0)
		if c.Witnesses, c.WitnessDetail, err = checkWitnesses(ctx, a, acct.UserID, b, keys); err != nil {
			return c, err
		}
	}
	return c, nil
}

func printCheck(w io.Writer, rep checkReport) error {
	var b strings.Builder
	fmt.Fprintf(&b, "store %s, service key %s\n", rep.Store, rep.ServiceKeyID)
	if rep.PinState != nil {
		fmt.Fprintf(&b, "pin state %s: %d accounts pinned at %s\n", rep.PinState.File, rep.PinState.Accounts, rep.PinState.PinnedAt)
	}
	for _, c := range rep.Accounts {
		mark := "ok      "
		if !c.OK {
			mark = "MISMATCH"
		}
		email := "-"
		if c.Email != nil {
			email = *c.Email
		}
		block := "none"
		if c.NewestBlock != nil {
			block = fmt.Sprintf("%d (size %d)", c.NewestBlock.Index, c.NewestBlock.TreeSize)
		}
		fmt.Fprintf(&b, "%s %s %s events %d, newest block %s, unsealed %d", mark, c.UserID, email, c.Events, block, c.UnsealedEvents)
		if c.Breaks+c.Gaps+c.SignatureFails > 0 {
			fmt.Fprintf(&b, ", breaks %d, gaps %d, signature failures %d", c.Breaks, c.Gaps, c.SignatureFails)
		}
		if c.Pin != nil {
			fmt.Fprintf(&b, ", pin %s", *c.Pin)
		}
		if c.Witnesses != witnessesNotConfigured {
			fmt.Fprintf(&b, ", witnesses %s", c.Witnesses)
		}
		b.WriteByte('\n')
		if c.MerkleRootDetail != nil {
			fmt.Fprintf(&b, "         merkle root: %s\n", *c.MerkleRootDetail)
		}
		if c.WitnessDetail != nil {
			fmt.Fprintf(&b, "         witnesses: %s\n", *c.WitnessDetail)
		}
		if c.PinDetail != nil && *c.PinDetail != "" {
			fmt.Fprintf(&b, "         pin: %s\n", *c.PinDetail)
		}
	}
	if rep.OK {
		fmt.Fprintf(&b, "%d accounts checked: all match\n", len(rep.Accounts))
	} else {
		fmt.Fprintf(&b, "%d accounts checked: %d do not match\n", len(rep.Accounts), rep.Mismatches)
	}
	if len(rep.Accounts) > 0 && rep.Accounts[0].Witnesses == witnessesNotConfigured {
		b.WriteString("witness cosignatures: not checked (give the witnesses' keys with --witness)\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// withServiceKey opens the store and reads its service key (from keyFile
// when given), creating none.
func withServiceKey(ctx context.Context, open opener, keyFile string) (*adminApp, func(), error) {
	var key ed25519.PrivateKey
	var keyErr error
	a, closeStore, err := open(func(d *app.Deps) {
		d.Config.ServiceKeyFile = keyFile
		key, keyErr = app.ReadServiceKey(ctx, d.Store, keyFile)
		d.ServiceKey = key
	})
	if err != nil {
		return nil, nil, err
	}
	if keyErr != nil {
		closeStore()
		return nil, nil, keyErr
	}
	a.ServiceKey = key
	return a, closeStore, nil
}

// serviceKeyFlag is --service-key-file of the commands that verify or sign
// with the service key.
func (e adminEnv) serviceKeyFlag(fs *flag.FlagSet) *string {
	return fs.String("service-key-file", e.getenv("AUDITCHAIN_SERVICE_KEY_FILE"), "the service key file serve uses (default: the key kept in the store) (env AUDITCHAIN_SERVICE_KEY_FILE)")
}

// eachAccount calls fn with every account, in user_id order, a page at a time.
func eachAccount(ctx context.Context, st *store.Store, fn func(store.AccountSummary) error) error {
	const page = 500
	after := ""
	for {
		as, err := st.AccountSummaries(ctx, after, page)
		if err != nil {
			return err
		}
		for _, a := range as {
			if err := fn(a); err != nil {
				return err
			}
		}
		if len(as) < page {
			return nil
		}
		after = as[len(as)-1].UserID
	}
}

// pinResult is what admin pin prints.
type pinResult struct {
	PinState     string `json:"pin_state"`
	ServiceKeyID string `json:"service_key_id"`
	PinnedAt     string `json:"pinned_at"`
	Accounts     int    `json:"accounts"`
}

func (e adminEnv) pin(args []string) error {
	fs, open := e.newAdmin("pin", pinUsage)
	to, force := targetFlags(fs, "file to write the pinned state to")
	keyFile := e.serviceKeyFlag(fs)
	quiet := fs.Bool("quiet", false, "no progress line on stderr")
	if err := e.noArgs(fs, args); err != nil {
		return err
	}
	a, closeStore, err := withServiceKey(e.ctx, func(deps func(*app.Deps)) (*adminApp, func(), error) {
		return openTarget(open, deps, "pin", *to, *force)
	}, *keyFile)
	if err != nil {
		return err
	}
	defer closeStore()
	// Seal first, so the pin covers every event stored, not only the
	// blocks someone happened to ask for (blocks are sealed lazily).
	line := progress.Start(e.stderr, progress.IsTerminal(e.stderr) && !*quiet,
		progress.Options{Label: "auditchain admin pin", Unit: "accounts sealed"})
	var ids []string
	err = eachAccount(e.ctx, a.Store, func(acct store.AccountSummary) error {
		defer line.Add(1)
		if _, _, err := a.Seal(e.ctx, acct.UserID); err != nil {
			return fmt.Errorf("seal account %s: %w", acct.UserID, err)
		}
		ids = append(ids, acct.UserID)
		return nil
	})
	line.Done()
	if err != nil {
		return err
	}
	state, err := pinstate.Take(e.ctx, a.Store, a.ServiceKeyID(), a.Now().UTC().Truncate(time.Second), ids)
	if err != nil {
		return err
	}
	signed, err := pinstate.Sign(state, a.ServiceKey)
	if err != nil {
		return err
	}
	if err := durable.WriteFile(*to, signed, *force); errors.Is(err, durable.ErrExists) {
		return fmt.Errorf("%s exists: choose another name, or add --force to replace it", *to)
	} else if err != nil {
		return err
	}
	return printJSON(e.stdout, pinResult{PinState: *to, ServiceKeyID: state.ServiceKeyID, PinnedAt: state.PinnedAt.Format(time.RFC3339), Accounts: len(state.Accounts)})
}

// comparePin opens the pin-state file with the service key and holds every
// pinned account against the store.
func comparePin(ctx context.Context, st *store.Store, pub ed25519.PublicKey, file string) (pinstate.State, []pinstate.Result, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return pinstate.State{}, nil, fmt.Errorf("--pin-state: %w", err)
	}
	state, err := pinstate.Open(b, pub)
	if err != nil {
		return pinstate.State{}, nil, fmt.Errorf("--pin-state %s: %w", file, err)
	}
	results, err := pinstate.Compare(ctx, st, state)
	return state, results, err
}

// checkPinState is serve's --pin-state: it refuses to start on a store that
// does not hold every pinned account's block and tree, naming each, so a
// restore that rolled accounts back is loud. The operator who means the
// rollback takes a new pin (docs/operations.md "Restore").
func checkPinState(ctx context.Context, st *store.Store, pub ed25519.PublicKey, file string) error {
	if file == "" {
		return nil
	}
	state, results, err := comparePin(ctx, st, pub, file)
	if err != nil {
		return err
	}
	var bad []string
	for _, r := range results {
		if r.Status != pinstate.StatusOK {
			bad = append(bad, fmt.Sprintf("  account %s: %s: %s", r.Pinned.UserID, r.Status, r.Detail))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("--pin-state %s: the store is behind or beside the state pinned at %s (%d of %d accounts):\n%s\n"+
		"a restore rolled these accounts back, or the store is not the one pinned. Restore a newer backup; or, if the rollback is intended, "+
		"take a new pin (auditchain admin pin --db %s --to %s --force) and start again",
		file, state.PinnedAt.Format(time.RFC3339), len(bad), len(results), strings.Join(bad, "\n"), st.DBFlag(), shellQuote(file))
}
