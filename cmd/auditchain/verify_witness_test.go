package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
)

// testWitness is a cosignature/v1 key pair: what a witness signs with, and
// the verifier key an auditor is given.
type testWitness struct {
	name, vkey string
	signer     note.Signer
}

func newTestWitness(t *testing.T, name string) testWitness {
	t.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, name)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := fnote.NewSignerForCosignatureV1(skey)
	if err != nil {
		t.Fatal(err)
	}
	if vkey, err = fnote.VKeyToCosignatureV1(vkey); err != nil {
		t.Fatal(err)
	}
	return testWitness{name: name, vkey: vkey, signer: signer}
}

// cosign is w's cosignature line on a signed checkpoint note, as a witness
// answers it.
func (w testWitness) cosign(t *testing.T, signedNote string) string {
	t.Helper()
	text, _, _ := strings.Cut(signedNote, "\n\n")
	signed, err := note.Sign(&note.Note{Text: text + "\n"}, w.signer)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(signed), "\n"), "\n")
	return lines[len(lines)-1]
}

// witnessedStore is a store with one account of 3 events whose newest block
// carries w's cosignature (as the witness job stores it), and its export.
func witnessedStore(t *testing.T, dsn string, w testWitness) (userID, export, serviceKey string) {
	t.Helper()
	a, p := witnessedAccount(t, dsn, w)
	return p.UserID, exportFile(t, a, p, nil), base64.StdEncoding.EncodeToString(a.ServicePublicKey())
}

// exportFile writes the account's export of leaves [0, to) (nil: the whole
// chain) to a file and returns its path.
func exportFile(t *testing.T, a *app.App, p app.Principal, to *int64) string {
	t.Helper()
	ctx := context.Background()
	x, err := a.PrepareExport(ctx, p, nil, to)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := x.WriteTo(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "export.ndjson")
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// witnessedAccount is witnessedStore's account before its export.
func witnessedAccount(t *testing.T, dsn string, w testWitness) (*app.App, app.Principal) {
	t.Helper()
	ctx := context.Background()
	st := storetest.Open(t, dsn)
	a := apptest.New(t, st, apptest.Options{})
	acct, _, err := a.CreateAccount(ctx, app.AccountRequest{NoEmail: true})
	if err != nil {
		t.Fatal(err)
	}
	p := app.Principal{UserID: acct.UserID, KeyID: "k", Kind: "api_key"}
	for i := range 3 {
		id, typ := fmt.Sprintf("evt-w-%d", i), "note"
		if _, err := a.AppendNext(ctx, p, api.EventInput{EventID: &id, EventType: &typ}, "rest"); err != nil {
			t.Fatal(err)
		}
	}
	b, _, err := a.Seal(ctx, acct.UserID)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := st.WriteDB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMicro()
	err = st.InsertCosignature(ctx, tx, acct.UserID, b.Index, store.Cosignature{Witness: w.name, Signature: w.cosign(t, string(b.Note))}, now)
	if err == nil {
		idx := b.Index
		err = st.SaveWitnessState(ctx, tx, store.WitnessState{UserID: acct.UserID, Witness: w.name, WitnessSize: int64(b.Size),
			CosignedSize: int64(b.Size), CosignedRoot: b.Root[:], CosignedBlock: &idx, LogSize: int64(b.Size), UpdatedAt: now})
	}
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		t.Fatal(err)
	}
	return a, p
}

// verify export --witness requires --quorum valid cosignatures on the
// export's last checkpoint and names who cosigned; a quorum not met fails
// (exit non-zero), naming the witnesses missing.
func TestVerifyExportRequiresTheWitnessQuorum(t *testing.T) {
	a, b := newTestWitness(t, "witness.example/a"), newTestWitness(t, "witness.example/b")
	_, file, key := witnessedStore(t, storetest.DSN(t, storetest.SQLite), a)
	verifyOut := func(args ...string) (exportReport, string, error) {
		t.Helper()
		out, errOut, err := runOut(t, noEnv, append([]string{"verify", "export", file, "--service-key", key}, args...)...)
		var rep exportReport
		if jerr := json.Unmarshal([]byte(out), &rep); jerr != nil {
			t.Fatalf("no report (%v): %s\n%s", err, out, errOut)
		}
		return rep, errOut, err
	}

	rep, _, err := verifyOut("--witness", a.vkey)
	if err != nil || !rep.Valid || rep.Witnesses == nil || !rep.Witnesses.Met || strings.Join(rep.Witnesses.Cosigned, ",") != a.name {
		t.Fatalf("one witness, who cosigned: %v %+v", err, rep.Witnesses)
	}
	rep, _, err = verifyOut("--witness", a.vkey, "--witness", b.vkey, "--quorum", "1")
	if err != nil || !rep.Valid || len(rep.Witnesses.Missing) != 1 || rep.Witnesses.Missing[0] != b.name {
		t.Fatalf("quorum 1 of 2: %v %+v", err, rep.Witnesses)
	}
	rep, errOut, err := verifyOut("--witness", a.vkey, "--witness", b.vkey)
	if err == nil || rep.Valid || rep.Failure == nil || rep.Failure.Kind != "witness_quorum" || rep.Witnesses.Met {
		t.Fatalf("quorum 2 of 2 with one cosignature: %v %+v %+v", err, rep.Failure, rep.Witnesses)
	}
	for _, want := range []string{"1 of 2", "missing: " + b.name, "cosigned: " + a.name} {
		if !strings.Contains(err.Error(), want) || !strings.Contains(errOut, want) {
			t.Errorf("the failure does not say %q: %v / %s", want, err, errOut)
		}
	}
	rep, _, err = verifyOut("--witness", b.vkey)
	if err == nil || rep.Witnesses.Met || len(rep.Witnesses.Cosigned) != 0 {
		t.Fatalf("a witness who did not cosign: %v %+v", err, rep.Witnesses)
	}
	if _, _, err := runOut(t, noEnv, "verify", "export", file, "--service-key", key, "--quorum", "1"); err == nil {
		t.Fatal("--quorum without --witness was accepted")
	}
	if _, _, err := runOut(t, noEnv, "verify", "export", file, "--service-key", key, "--witness", a.vkey, "--quorum", "2"); err == nil {
		t.Fatal("--quorum above the witnesses given was accepted")
	}
}

// On an account that goes on appending, an export seals a new block, which
// the witnesses cosign only at their next run: the whole export does not
// meet the quorum. An export that ends on the newest cosigned block does:
// its events are covered by that block, whatever block past the range ties
// them to the newer tree.
func TestVerifyExportQuorumOnAnActiveAccount(t *testing.T) {
	w := newTestWitness(t, "witness.example/a")
	a, p := witnessedAccount(t, storetest.DSN(t, storetest.SQLite), w)
	ctx := context.Background()
	for i := range 2 {
		id, typ := fmt.Sprintf("evt-after-%d", i), "note"
		if _, err := a.AppendNext(ctx, p, api.EventInput{EventID: &id, EventType: &typ}, "rest"); err != nil {
			t.Fatal(err)
		}
	}
	key := base64.StdEncoding.EncodeToString(a.ServicePublicKey())
	verifyOut := func(file string) (exportReport, error) {
		t.Helper()
		out, errOut, err := runOut(t, noEnv, "verify", "export", file, "--service-key", key, "--witness", w.vkey)
		var rep exportReport
		if jerr := json.Unmarshal([]byte(out), &rep); jerr != nil {
			t.Fatalf("no report (%v): %s\n%s", err, out, errOut)
		}
		return rep, err
	}
	rep, err := verifyOut(exportFile(t, a, p, nil))
	if err == nil || rep.Witnesses.Met || rep.Witnesses.Block == nil || *rep.Witnesses.Block != 1 {
		t.Fatalf("the whole export, ending on the block it sealed: %v %+v", err, rep.Witnesses)
	}
	cosigned := int64(3) // the size of the cosigned block
	rep, err = verifyOut(exportFile(t, a, p, &cosigned))
	if err != nil || !rep.Valid || !rep.Witnesses.Met || rep.Witnesses.Block == nil || *rep.Witnesses.Block != 0 {
		t.Fatalf("the export up to the cosigned block: %v %+v", err, rep.Witnesses)
	}
}

// admin check --witness reports each account's newest block ok when the
// quorum of cosignatures stored on it verify, none when fewer (naming who
// is missing; not a mismatch), and mismatch when a stored cosignature does
// not verify or a witness cosigned another root than the store's tree.
func TestAdminCheckReportsWitnessCosignatures(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		a, b := newTestWitness(t, "witness.example/a"), newTestWitness(t, "witness.example/b")
		userID, _, _ := witnessedStore(t, dsn, a)
		check := func(args ...string) accountCheck {
			t.Helper()
			rep, _ := adminCheck(t, dsn, append([]string{"--quiet"}, args...)...)
			if len(rep.Accounts) != 1 {
				t.Fatalf("report: %+v", rep)
			}
			return rep.Accounts[0]
		}
		if c := check(); c.Witnesses != witnessesNotConfigured {
			t.Fatalf("without --witness: %+v", c)
		}
		if c := check("--witness", a.vkey); c.Witnesses != witnessesOK || !c.OK {
			t.Fatalf("cosigned: %+v %v", c, c.WitnessDetail)
		}
		if c := check("--witness", "http://127.0.0.1:1="+a.vkey, "--witness", b.vkey); c.Witnesses != witnessesNone || !c.OK ||
			c.WitnessDetail == nil || !strings.Contains(*c.WitnessDetail, "missing: "+b.name) {
			t.Fatalf("one of two: %+v %v", c, c.WitnessDetail)
		}
		execSQL(t, dsn, fmt.Sprintf(`UPDATE witness_state SET cosigned_root = cosigned_root || cosigned_root WHERE user_id = '%s'`, userID))
		if c := check("--witness", a.vkey); c.Witnesses != witnessesMismatch || c.OK || !strings.Contains(*c.WitnessDetail, "fork") {
			t.Fatalf("another root cosigned: %+v %v", c, c.WitnessDetail)
		}
		forged := b.cosign(t, "other\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n")
		forged = strings.Replace(forged, b.name, a.name, 1)
		execSQL(t, dsn, fmt.Sprintf(`UPDATE block_cosignatures SET signature = '%s' WHERE user_id = '%s'`, forged, userID))
		if c := check("--witness", a.vkey); c.Witnesses != witnessesMismatch || c.OK || !strings.Contains(*c.WitnessDetail, "stored cosignature") {
			t.Fatalf("a forged cosignature: %+v %v", c, c.WitnessDetail)
		}
	})
}

// chain export --witness ends the export on the newest block the witnesses
// cosigned, not on the block its own read seals: verify export with the same
// keys then finds the quorum on an account that keeps appending. With no
// such block it says so; --to and --witness together are refused.
func TestChainExportEndsOnTheNewestWitnessedBlock(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		w := newTestWitness(t, "witness.example/export")
		svc := startMonitorService(t, dsn)
		env := getenvOf(svc.env())
		appendEvents(t, svc.env(), 3)
		if _, _, err := runOut(t, env, "chain", "export", "--witness", w.vkey); err == nil || !strings.Contains(err.Error(), "no block carries 1 of the --witness keys' cosignatures") {
			t.Fatalf("nothing cosigned yet: %v", err)
		}
		cosigned := cosignNewest(t, svc, storetest.Open(t, dsn), w)
		appendEvents(t, svc.env(), 2)
		if _, _, err := svc.srv.App.Seal(context.Background(), svc.userID); err != nil { // a newer block, not cosigned
			t.Fatal(err)
		}
		out, errOut, err := runOut(t, env, "chain", "export", "--witness", w.vkey)
		if err != nil {
			t.Fatalf("chain export --witness: %v\n%s", err, errOut)
		}
		file := filepath.Join(t.TempDir(), "witnessed.ndjson")
		if err := os.WriteFile(file, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		key := base64.StdEncoding.EncodeToString(svc.srv.App.ServicePublicKey())
		vout, verrOut, err := runOut(t, noEnv, "verify", "export", file, "--service-key", key, "--witness", w.vkey)
		var rep exportReport
		if jerr := json.Unmarshal([]byte(vout), &rep); jerr != nil || err != nil || !rep.Valid || rep.Events != int64(cosigned.Size) ||
			rep.Witnesses == nil || !rep.Witnesses.Met || rep.Witnesses.Block == nil || *rep.Witnesses.Block != cosigned.Index {
			t.Fatalf("the witnessed export: %v %v %+v %+v\n%s", err, jerr, rep, rep.Witnesses, verrOut)
		}
		if _, _, err := runOut(t, env, "chain", "export", "--witness", w.vkey, "--to", "2"); err == nil || !strings.Contains(err.Error(), "give one of them") {
			t.Fatalf("--to with --witness: %v", err)
		}
	})
}

// chain export --witness reads the blocks from the newest back, page by
// page, and ends on the highest block with the quorum however the pages
// fall: here the newer cosigned block is the last of the second page, an
// older one further back; a quorum of one of two keys takes it too; and a
// scan that reaches its bound without a witnessed block says how far it looked.
func TestChainExportFindsTheWitnessedBlockAcrossPages(t *testing.T) {
	pageWas, scannedWas := witnessedBlocksPage, witnessedBlocksScanned
	witnessedBlocksPage, witnessedBlocksScanned = 10, 1000
	t.Cleanup(func() { witnessedBlocksPage, witnessedBlocksScanned = pageWas, scannedWas })

	dsn := storetest.DSN(t, storetest.SQLite)
	w, other := newTestWitness(t, "witness.example/pages"), newTestWitness(t, "witness.example/other")
	svc := startMonitorService(t, dsn)
	st := storetest.Open(t, dsn)
	ctx := context.Background()
	p := app.Principal{UserID: svc.userID, KeyID: "k", Kind: "api_key"}
	var newer store.BlockRow
	for i := range 25 { // blocks 0..24, one event each
		id, typ := fmt.Sprintf("evt-page-%d", i), "note"
		if _, err := svc.srv.App.AppendNext(ctx, p, api.EventInput{EventID: &id, EventType: &typ}, "rest"); err != nil {
			t.Fatal(err)
		}
		switch i {
		case 4:
			cosignNewest(t, svc, st, w)
		case 14: // windows of 10 from the newest (24): [15, 24], [5, 14]
			newer = cosignNewest(t, svc, st, w)
		default:
			if _, _, err := svc.srv.App.Seal(ctx, svc.userID); err != nil {
				t.Fatal(err)
			}
		}
	}
	if newer.Index != 14 {
		t.Fatalf("the newer cosigned block is %d, want 14", newer.Index)
	}
	env := getenvOf(svc.env())
	for _, args := range [][]string{{"--witness", w.vkey}, {"--witness", w.vkey, "--witness", other.vkey, "--quorum", "1"}} {
		out, errOut, err := runOut(t, env, append([]string{"chain", "export"}, args...)...)
		if err != nil {
			t.Fatalf("chain export %v: %v\n%s", args, err, errOut)
		}
		if n := strings.Count(out, `"event":`); n != int(newer.Size) {
			t.Fatalf("chain export %v holds %d events, want the %d of block %d", args, n, newer.Size, newer.Index)
		}
	}
	witnessedBlocksScanned = 8 // the newest 8 blocks are none of them cosigned
	if _, _, err := runOut(t, env, "chain", "export", "--witness", w.vkey); err == nil || !strings.Contains(err.Error(), "none of the newest 8 blocks") {
		t.Fatalf("a bounded scan that finds nothing: %v", err)
	}
}
