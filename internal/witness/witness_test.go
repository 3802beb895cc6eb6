package witness

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/transparency-dev/formats/log"
	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"

	"github.com/auditchain/auditchain/internal/checkpoint"
	"github.com/auditchain/auditchain/pkg/verify"
)

// Every answer tlog-witness names for add-checkpoint, each from a request
// that should get it, in the order the witness's record moves.
func TestAddCheckpointAnswers(t *testing.T) {
	lg := newMemLog(t, "example.com/log").append(20, "a")
	other := newMemLog(t, "example.com/other").append(3, "o")
	tw := newTestWitness(t, "", logsOf(t, lg))
	wrongKey := newMemLog(t, "example.com/log").append(20, "a") // same origin, a key not trusted
	emptyRoot := func() []byte {
		m := newMemLog(t, "example.com/log")
		m.signer = lg.signer
		return m.checkpoint(0)
	}()
	badSig := bytes.Replace(lg.checkpoint(5), []byte("\n— example.com/log "), []byte("\n— example.com/log AAAA"), 1)
	nonEmptyZero := func() []byte {
		body := "example.com/log\n0\n" + base64.StdEncoding.EncodeToString(lg.root(3)) + "\n"
		msg, err := note.Sign(&note.Note{Text: body}, lg.signer)
		if err != nil {
			t.Fatal(err)
		}
		return msg
	}()
	garbageProof := [][]byte{bytes.Repeat([]byte{7}, 32), bytes.Repeat([]byte{9}, 32)}

	for _, tc := range []struct {
		name       string
		body       []byte
		wantStatus int
		wantBody   string // for 409: the size line
	}{
		{"unknown origin", addBody(0, nil, other.checkpoint(3)), 404, ""},
		{"signed by an untrusted key only", addBody(0, nil, wrongKey.checkpoint(5)), 403, ""},
		{"a trusted key's signature fails", addBody(0, nil, badSig), 403, ""},
		{"no old line", []byte("\n" + string(lg.checkpoint(5))), 400, ""},
		{"old size with a leading zero", []byte("old 00\n\n" + string(lg.checkpoint(5))), 400, ""},
		{"proof line not base64 of 32 bytes", []byte("old 0\nnot-a-hash\n\n" + string(lg.checkpoint(5))), 400, ""},
		{"no blank line", []byte("old 0\n"), 400, ""},
		{"no checkpoint", []byte("old 0\n\n"), 400, ""},
		{"64 proof lines", addBody(0, make([][]byte, 64), lg.checkpoint(5)), 400, ""},
		{"old above the checkpoint's size", addBody(6, nil, lg.checkpoint(5)), 400, ""},
		{"size 0 with another root", addBody(0, nil, nonEmptyZero), 422, ""},
		{"size 0, empty root: cosigned", addBody(0, nil, emptyRoot), 200, ""},
		{"old 0 with a proof", addBody(0, garbageProof, lg.checkpoint(5)), 422, ""},
		{"first checkpoint: cosigned", addBody(0, nil, lg.checkpoint(5)), 200, ""},
		{"old size not the witness's", addBody(3, lg.proof(3, 9), lg.checkpoint(9)), 409, "5\n"},
		{"old 0 after a cosignature", addBody(0, nil, lg.checkpoint(9)), 409, "5\n"},
		{"proof that does not verify", addBody(5, garbageProof, lg.checkpoint(9)), 422, ""},
		{"proof of other sizes", addBody(5, lg.proof(4, 9), lg.checkpoint(9)), 422, ""},
		{"consistent: cosigned", addBody(5, lg.proof(5, 9), lg.checkpoint(9)), 200, ""},
		{"same size, same root: cosigned again", addBody(9, nil, lg.checkpoint(9)), 200, ""},
		{"same size, another root", addBody(9, nil, lg.withKey().append(9, "b").checkpoint(9)), 422, ""},
		{"same size with a proof", addBody(9, garbageProof, lg.checkpoint(9)), 422, ""},
		{"with an extension line", addBody(9, lg.proof(9, 20), lg.checkpoint(20, "prev "+base64.StdEncoding.EncodeToString(make([]byte, 32)))), 200, ""},
	} {
		status, body, ctype := tw.add(tc.body)
		if status != tc.wantStatus {
			t.Errorf("%s: status %d (%q), want %d", tc.name, status, body, tc.wantStatus)
			continue
		}
		switch status {
		case http.StatusConflict:
			if body != tc.wantBody || ctype != "text/x.tlog.size" {
				t.Errorf("%s: 409 body %q type %q, want %q text/x.tlog.size", tc.name, body, ctype, tc.wantBody)
			}
		case http.StatusOK:
			if !strings.HasPrefix(body, "— witness.test/w1 ") || strings.Count(body, "\n") != 1 || !strings.HasSuffix(body, "\n") {
				t.Errorf("%s: 200 body %q is not one note signature line of the witness", tc.name, body)
			}
		}
	}
	rec, err := tw.state.Get(context.Background(), "example.com/log")
	if err != nil || rec.Size != 20 {
		t.Fatalf("record after the requests: %+v %v, want size 20", rec, err)
	}
}

// The 200's lines are cosignature/v1 signatures (tlog-cosignature) by the
// witness key over the checkpoint body: formats' verifier, given the vkey
// keygen prints, accepts them appended to the checkpoint, and the signed
// time is now.
func TestCosignatureVerifiesWithFormats(t *testing.T) {
	lg := newMemLog(t, "example.com/log").append(7, "a")
	tw := newTestWitness(t, "", logsOf(t, lg))
	if !strings.Contains(tw.vkey, "+") {
		t.Fatalf("vkey %q", tw.vkey)
	}
	cp := lg.checkpoint(7, "ext line")
	before := time.Now().Add(-time.Second)
	cosig := tw.mustCosign(0, nil, cp)
	after := time.Now().Add(time.Second)

	v, err := fnote.NewVerifierForCosignatureV1(tw.vkey)
	if err != nil {
		t.Fatal(err)
	}
	// tlog-witness: "the client MAY concatenate it to the checkpoint, and
	// use a note verification function configured with the witness keys".
	n, err := note.Open(append(bytes.Clone(cp), cosig...), note.VerifierList(v))
	if err != nil {
		t.Fatalf("the cosigned checkpoint does not verify under the witness vkey: %v", err)
	}
	if len(n.Sigs) != 1 || n.Sigs[0].Name != "witness.test/w1" || n.Sigs[0].Hash != v.KeyHash() {
		t.Fatalf("verified signatures %+v", n.Sigs)
	}
	ts, err := fnote.CoSigV1Timestamp(n.Sigs[0])
	if err != nil || ts.Before(before) || ts.After(after) {
		t.Fatalf("cosignature time %v (%v), want between %v and %v", ts, err, before, after)
	}
	// The vkey is of type 0x04 (Ed25519 cosignature/v1), and its key hash
	// is SHA-256(name || "\n" || 0x04 || key)[:4] as tlog-cosignature says.
	parts := strings.SplitN(tw.vkey, "+", 3)
	key, _ := base64.StdEncoding.DecodeString(parts[2])
	if key[0] != 0x04 || len(key) != 33 {
		t.Fatalf("vkey key type %#x len %d, want 0x04 and 32 bytes", key[0], len(key)-1)
	}
	h := sha256.Sum256(append([]byte("witness.test/w1\n"), key...))
	if want := fmt.Sprintf("%02x%02x%02x%02x", h[0], h[1], h[2], h[3]); parts[1] != want {
		t.Fatalf("vkey hash %s, want %s", parts[1], want)
	}
	// The signature is over "cosignature/v1\ntime <t>\n" + the body, checked
	// here with Ed25519 itself rather than formats.
	raw, _ := base64.StdEncoding.DecodeString(n.Sigs[0].Base64)
	msg := fmt.Sprintf("cosignature/v1\ntime %d\n%s", ts.Unix(), n.Text)
	if !ed25519.Verify(ed25519.PublicKey(key[1:]), []byte(msg), raw[4+8:]) {
		t.Fatal("the signature is not Ed25519 over the cosignature/v1 message")
	}
	// The log's signature is untouched beside it.
	if _, err := note.Open(append(bytes.Clone(cp), cosig...), note.VerifierList(lg.signerVerifier(t))); err != nil {
		t.Fatalf("the log's own signature must still verify beside the cosignature: %v", err)
	}
}

func (l *memLog) signerVerifier(t testing.TB) note.Verifier {
	v, err := note.NewVerifier(l.vkey)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// A restarted witness (the same file) keeps what it cosigned: an older
// checkpoint, or a fresh start from 0, is refused with the size it holds.
func TestRestartRefusesOlderCheckpoint(t *testing.T) {
	lg := newMemLog(t, "example.com/log").append(10, "a")
	db := filepath.Join(t.TempDir(), "witness.db")
	skey, _, err := GenerateKey("witness.test/w1")
	if err != nil {
		t.Fatal(err)
	}
	tw := openTestWitness(t, db, skey, logsOf(t, lg))
	tw.mustCosign(0, nil, lg.checkpoint(4))
	tw.mustCosign(4, lg.proof(4, 10), lg.checkpoint(10))
	tw.close()

	tw = openTestWitness(t, db, skey, logsOf(t, lg))
	tw.mustConflict(addBody(0, nil, lg.checkpoint(4)), 10)
	tw.mustConflict(addBody(4, lg.proof(4, 6), lg.checkpoint(6)), 10)
	if status, body, _ := tw.add(addBody(10, nil, lg.checkpoint(6))); status != http.StatusBadRequest {
		t.Fatalf("old 10 with a checkpoint of 6: %d %s, want 400", status, body)
	}
	lg.append(5, "b")
	tw.mustCosign(10, lg.proof(10, 15), lg.checkpoint(15))
}

// The record's last defence: the database refuses a smaller size whatever
// the code does.
func TestStateNeverShrinks(t *testing.T) {
	st, err := OpenState(context.Background(), filepath.Join(t.TempDir(), "w.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	rec, _ := st.Get(ctx, "o")
	if err := st.advance(ctx, rec, Record{Origin: "o", Size: 9, Checkpoint: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	rec, _ = st.Get(ctx, "o")
	err = st.advance(ctx, rec, Record{Origin: "o", Size: 8, Checkpoint: []byte("y")})
	if err == nil || !strings.Contains(err.Error(), "never decreases") {
		t.Fatalf("advance to a smaller size: %v, want the trigger's refusal", err)
	}
	if rec, _ := st.Get(ctx, "o"); rec.Size != 9 {
		t.Fatalf("size %d after the refused write", rec.Size)
	}
	// A write from a record read before another write is stale.
	if err := st.advance(ctx, Record{Origin: "o", found: true, Size: 3}, Record{Origin: "o", Size: 12}); err != errStale {
		t.Fatalf("advance from a stale record: %v, want errStale", err)
	}
}

// Requests racing from the same old size: exactly one is cosigned, every
// other gets 409 with a size some winner stored, and the record is the
// largest cosigned (tlog-witness's race, steps 1–6, cannot roll it back).
func TestConcurrentRequestsFromTheSameOldSize(t *testing.T) {
	lg := newMemLog(t, "example.com/log").append(40, "a")
	tw := newTestWitness(t, "", logsOf(t, lg))
	tw.mustCosign(0, nil, lg.checkpoint(8))
	const n = 24
	type answer struct {
		size   int64
		status int
		body   string
	}
	answers := make([]answer, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			size := int64(9 + i)
			status, body, _ := tw.add(addBody(8, lg.proof(8, size), lg.checkpoint(size)))
			answers[i] = answer{size, status, body}
		})
	}
	wg.Wait()
	var won []int64
	for _, a := range answers {
		switch a.status {
		case http.StatusOK:
			won = append(won, a.size)
		case http.StatusConflict:
		default:
			t.Errorf("size %d: %d %s", a.size, a.status, a.body)
		}
	}
	if len(won) != 1 {
		t.Fatalf("%d requests from old size 8 were cosigned (%v), want exactly 1", len(won), won)
	}
	for _, a := range answers {
		if a.status == http.StatusConflict && a.body != fmt.Sprintf("%d\n", won[0]) {
			t.Errorf("size %d: 409 %q, want the winner's size %d", a.size, a.body, won[0])
		}
	}
	if rec, _ := tw.state.Get(context.Background(), lg.origin); int64(rec.Size) != won[0] {
		t.Fatalf("record size %d, want %d", rec.Size, won[0])
	}
}

// A fork: a second tree under the same origin and key (what a log shows
// a second auditor). Once the witness cosigned one, the other is refused
// at every size, and the record stays the first's.
func TestForkIsRefused(t *testing.T) {
	a := newMemLog(t, "example.com/log").append(6, "a")
	b := a.withKey().append(4, "a").append(6, "forked") // shares the first 4 leaves
	tw := newTestWitness(t, "", logsOf(t, a))
	tw.mustCosign(0, nil, a.checkpoint(6))

	for _, tc := range []struct {
		name string
		body []byte
		want int
	}{
		{"the fork at the same size", addBody(6, nil, b.checkpoint(6)), 422},
		{"the fork grown, proved from its own size 6", addBody(6, b.proof(6, 10), b.checkpoint(10)), 422},
		{"the fork from a fresh start", addBody(0, nil, b.checkpoint(10)), 409},
		{"the fork from the shared prefix", addBody(4, b.proof(4, 10), b.checkpoint(10)), 409},
	} {
		if status, body, _ := tw.add(tc.body); status != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, status, body, tc.want)
		}
	}
	rec, _ := tw.state.Get(context.Background(), a.origin)
	if rec.Size != 6 || !bytes.Equal(rec.Root[:], a.root(6)) {
		t.Fatalf("record %d %x, want the first tree's size 6", rec.Size, rec.Root)
	}

	// The fork at the cosigned size is kept as evidence beside the
	// checkpoint the witness had cosigned, once however often it is sent:
	// the pair proves the split view with the log's key alone. The grown
	// fork, whose proof failed, proves nothing by itself and is not kept;
	// nor is the cosigned checkpoint itself sent back with a proof (422:
	// equal sizes need an empty proof), which anyone could do.
	tw.add(addBody(6, nil, b.checkpoint(6)))
	if status, body, _ := tw.add(addBody(6, [][]byte{bytes.Repeat([]byte{1}, 32)}, a.checkpoint(6))); status != 422 {
		t.Fatalf("the cosigned checkpoint with a proof: %d %s", status, body)
	}
	evidence, err := ReadEvidence(context.Background(), tw.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(evidence) != 1 || evidence[0].Kind != EvidenceSameSizeOtherRoot || evidence[0].TreeSize != 6 ||
		evidence[0].Submitted != string(b.checkpoint(6)) {
		t.Fatalf("evidence kept: %+v", evidence)
	}
	logKey, err := note.NewVerifier(a.vkey)
	if err != nil {
		t.Fatal(err)
	}
	cosignedNote, err := note.Open([]byte(evidence[0].Cosigned), note.VerifierList(logKey))
	if err != nil {
		t.Fatalf("the cosigned checkpoint kept does not verify with the log's key: %v", err)
	}
	if !strings.HasPrefix(cosignedNote.Text, string(firstLine(string(a.checkpoint(6))))) ||
		!strings.Contains(evidence[0].Cosigned, "— witness.test/w1 ") {
		t.Fatalf("the cosigned checkpoint kept: %q", evidence[0].Cosigned)
	}
	var roots [2]string
	for i, n := range []string{evidence[0].Submitted, evidence[0].Cosigned} {
		opened, err := note.Open([]byte(n), note.VerifierList(logKey))
		if err != nil {
			t.Fatalf("kept note %d does not verify with the log's key: %v", i, err)
		}
		var cp log.Checkpoint
		if _, err := cp.Unmarshal([]byte(opened.Text)); err != nil || cp.Size != 6 {
			t.Fatalf("kept note %d: size %d, %v", i, cp.Size, err)
		}
		roots[i] = string(cp.Hash)
	}
	if roots[0] == roots[1] {
		t.Fatal("the same-size evidence holds one root twice")
	}
}

// Evidence is bounded per log: the newest maxEvidencePerLog are kept.
func TestEvidenceBoundedPerLog(t *testing.T) {
	a := newMemLog(t, "example.com/log").append(3, "a")
	tw := newTestWitness(t, "", logsOf(t, a))
	tw.mustCosign(0, nil, a.checkpoint(3))
	for i := range maxEvidencePerLog + 5 {
		// Another root at size 3 each time, all signed by the log's key.
		fork := a.withKey().append(3, fmt.Sprintf("fork%d", i))
		if status, body, _ := tw.add(addBody(3, nil, fork.checkpoint(3))); status != 422 {
			t.Fatalf("fork %d: %d %s", i, status, body)
		}
	}
	evidence, err := ReadEvidence(context.Background(), tw.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(evidence) != maxEvidencePerLog {
		t.Fatalf("%d kept, want %d", len(evidence), maxEvidencePerLog)
	}
	last := a.withKey().append(3, fmt.Sprintf("fork%d", maxEvidencePerLog+4))
	if evidence[len(evidence)-1].Submitted != string(last.checkpoint(3)) {
		t.Error("the newest refusal is not the last kept")
	}
}

// GET /<origin hash>/checkpoint serves the latest cosigned checkpoint with
// the log's signature and the cosignature; 404 before any.
func TestMonitoringCheckpoint(t *testing.T) {
	lg := newMemLog(t, "example.com/log").append(3, "a")
	tw := newTestWitness(t, "", logsOf(t, lg))
	get := func() (int, string) {
		resp, err := http.Get(tw.url + "/" + OriginHash(lg.origin) + "/checkpoint")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	if status, _ := get(); status != http.StatusNotFound {
		t.Fatalf("before any cosignature: %d, want 404", status)
	}
	cp := lg.checkpoint(3)
	cosig := tw.mustCosign(0, nil, cp)
	status, body := get()
	if status != http.StatusOK || body != string(cp)+cosig {
		t.Fatalf("GET checkpoint: %d %q, want %q", status, body, string(cp)+cosig)
	}
}

// Unknown signatures on the checkpoint are ignored, and not kept.
func TestUnknownSignaturesIgnored(t *testing.T) {
	lg := newMemLog(t, "example.com/log").append(3, "a")
	stranger := newMemLog(t, "someone.else/key")
	tw := newTestWitness(t, "", logsOf(t, lg))
	n, err := note.Open(lg.checkpoint(3), note.VerifierList(lg.signerVerifier(t)))
	if err != nil {
		t.Fatal(err)
	}
	both, err := note.Sign(n, stranger.signer)
	if err != nil {
		t.Fatal(err)
	}
	tw.mustCosign(0, nil, both)
	cp, _, _ := tw.w.Checkpoint(context.Background(), OriginHash(lg.origin))
	if strings.Contains(string(cp), "someone.else/key") {
		t.Fatalf("the stored checkpoint keeps an unverified signature:\n%s", cp)
	}
}

// The auditchain family: any "auditchain/<uuid>" signed by the service
// key under that origin's name; not another key, not another name form,
// not the service's pin-state note.
func TestAuditchainServiceFamily(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	_, otherPriv, _ := ed25519.GenerateKey(rand.Reader)
	logs := NewLogs()
	vkey, err := verify.CheckpointVerifierKey("auditchain/anything", pub)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := ParseServiceKey(vkey)
	if err != nil || !parsed.Equal(pub) {
		t.Fatalf("ParseServiceKey(vkey) = %x, %v", parsed, err)
	}
	if parsed, err := ParseServiceKey(base64.StdEncoding.EncodeToString(pub)); err != nil || !parsed.Equal(pub) {
		t.Fatalf("ParseServiceKey(base64) = %x, %v", parsed, err)
	}
	if err := logs.AddService(parsed); err != nil {
		t.Fatal(err)
	}
	tw := newTestWitness(t, "", logs)
	block := func(origin string, key ed25519.PrivateKey) []byte {
		s, err := checkpoint.NewSigner(origin, key)
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.SignBlock(0, verify.EmptyRoot, nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	const id = "0190f3a2-7c4e-7000-8000-00000000c0de"
	for _, tc := range []struct {
		name   string
		origin string
		key    ed25519.PrivateKey
		want   int
	}{
		{"an account log", "auditchain/" + id, priv, 200},
		{"another key", "auditchain/0190f3a2-7c4e-7000-8000-00000000beef", otherPriv, 403},
		{"upper-case uuid", "auditchain/" + strings.ToUpper(id), priv, 404},
		{"not a uuid", "auditchain/pin-state", priv, 404},
		{"another prefix", "auditchains/" + id, priv, 404},
	} {
		if status, body, _ := tw.add(addBody(0, nil, block(tc.origin, tc.key))); status != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, status, body, tc.want)
		}
	}
}

// Whatever the body, add-checkpoint answers one of tlog-witness's statuses
// (never a panic, never a 500), and a 200 only for a checkpoint the log
// signed.
func FuzzAddCheckpoint(f *testing.F) {
	lg := newMemLog(f, "example.com/log").append(9, "a")
	f.Add(addBody(0, nil, lg.checkpoint(4)))
	f.Add(addBody(4, lg.proof(4, 9), lg.checkpoint(9)))
	f.Add([]byte("old 0\n\nexample.com/log\n0\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n\n— example.com/log AAAA\n"))
	f.Add([]byte("old 18446744073709551615\n\n"))
	st, err := OpenState(context.Background(), filepath.Join(f.TempDir(), "w.db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	skey, _, _ := GenerateKey("witness.test/fuzz")
	signer, vkey, _ := NewSigner(skey)
	w, err := New(signer, vkey, logsOf(f, lg), st)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		cosig, err := w.AddCheckpoint(context.Background(), body)
		switch status := Status(err); {
		case err == nil:
			if !bytes.HasPrefix(cosig, []byte("— witness.test/fuzz ")) {
				t.Fatalf("200 with %q", cosig)
			}
			if _, perr := parseAddRequest(body); perr != nil {
				t.Fatalf("cosigned a body that does not parse: %v", perr)
			}
		case status == http.StatusInternalServerError:
			t.Fatalf("500 for %q: %v", body, err)
		}
	})
}

// witness evidence reads only a witness's state: another SQLite file is
// named as such, not shown as a witness that kept nothing.
func TestReadEvidenceRefusesAnotherDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "other.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE events (id INTEGER)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := ReadEvidence(context.Background(), path); err == nil || !strings.Contains(err.Error(), "not a witness's state") {
		t.Fatalf("ReadEvidence of another database: %v", err)
	}
}
