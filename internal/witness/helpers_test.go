package witness

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/transparency-dev/formats/log"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// memLog is a log for the tests: an RFC 6962 tree in memory (tlog's stored
// hashes) and a note key whose name is its origin.
type memLog struct {
	t      testing.TB
	origin string
	signer note.Signer
	vkey   string
	stored []tlog.Hash
	size   int64
}

func newMemLog(t testing.TB, origin string) *memLog {
	t.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, origin)
	if err != nil {
		t.Fatal(err)
	}
	s, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	return &memLog{t: t, origin: origin, signer: s, vkey: vkey}
}

// withKey is a second log of the same origin and key (a fork): its tree
// is its own.
func (l *memLog) withKey() *memLog {
	return &memLog{t: l.t, origin: l.origin, signer: l.signer, vkey: l.vkey}
}

func (l *memLog) reader() tlog.HashReader {
	return tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			out[i] = l.stored[x]
		}
		return out, nil
	})
}

// append adds n leaves whose data start with tag.
func (l *memLog) append(n int, tag string) *memLog {
	for range n {
		hs, err := tlog.StoredHashes(l.size, fmt.Appendf(nil, "%s %d", tag, l.size), l.reader())
		if err != nil {
			l.t.Fatal(err)
		}
		l.stored = append(l.stored, hs...)
		l.size++
	}
	return l
}

func (l *memLog) root(size int64) []byte {
	h, err := tlog.TreeHash(size, l.reader())
	if err != nil {
		l.t.Fatal(err)
	}
	return h[:]
}

// checkpoint is the log's signed checkpoint of size, extension lines after.
func (l *memLog) checkpoint(size int64, ext ...string) []byte {
	body := log.Checkpoint{Origin: l.origin, Size: uint64(size), Hash: l.root(size)}.Marshal()
	for _, e := range ext {
		body = append(body, e+"\n"...)
	}
	msg, err := note.Sign(&note.Note{Text: string(body)}, l.signer)
	if err != nil {
		l.t.Fatal(err)
	}
	return msg
}

func (l *memLog) proof(old, size int64) [][]byte {
	if old == 0 || old == size {
		return nil
	}
	p, err := tlog.ProveTree(size, old, l.reader())
	if err != nil {
		l.t.Fatal(err)
	}
	out := make([][]byte, len(p))
	for i := range p {
		out[i] = p[i][:]
	}
	return out
}

// addBody is an add-checkpoint request body.
func addBody(old uint64, proof [][]byte, cp []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "old %d\n", old)
	for _, h := range proof {
		if h == nil {
			h = make([]byte, 32)
		}
		b.WriteString(base64.StdEncoding.EncodeToString(h) + "\n")
	}
	b.WriteString("\n")
	b.Write(cp)
	return b.Bytes()
}

// testWitness is a witness over a state file, served over HTTP.
type testWitness struct {
	t      testing.TB
	w      *Witness
	state  *State
	dbPath string
	vkey   string
	url    string
	srv    *httptest.Server

	mu       sync.Mutex
	statuses map[int]int // answers given, by status
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(status int) {
	r.status = status
	r.ResponseWriter.WriteHeader(status)
}

// conflicts is the number of 409s answered so far.
func (tw *testWitness) conflicts() int {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	return tw.statuses[http.StatusConflict]
}

func newTestWitness(t testing.TB, dbPath string, logs *Logs) *testWitness {
	t.Helper()
	skey, _, err := GenerateKey("witness.test/w1")
	if err != nil {
		t.Fatal(err)
	}
	return openTestWitness(t, dbPath, skey, logs)
}

func openTestWitness(t testing.TB, dbPath, skey string, logs *Logs) *testWitness {
	t.Helper()
	if dbPath == "" {
		dbPath = filepath.Join(t.TempDir(), "witness.db")
	}
	signer, vkey, err := NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	st, err := OpenState(context.Background(), dbPath)
	if err != nil {
		t.Fatal(err)
	}
	w, err := New(signer, vkey, logs, st)
	if err != nil {
		t.Fatal(err)
	}
	tw := &testWitness{t: t, w: w, state: st, dbPath: dbPath, vkey: vkey, statuses: map[int]int{}}
	h := Handler(w, slog.New(slog.NewTextHandler(io.Discard, nil)))
	tw.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: rw, status: http.StatusOK}
		h.ServeHTTP(rec, r)
		tw.mu.Lock()
		tw.statuses[rec.status]++
		tw.mu.Unlock()
	}))
	tw.url = tw.srv.URL
	t.Cleanup(tw.close)
	return tw
}

func (tw *testWitness) close() {
	tw.srv.Close()
	tw.state.Close()
}

// add posts an add-checkpoint body and returns the status, the body and
// the content type.
func (tw *testWitness) add(body []byte) (int, string, string) {
	tw.t.Helper()
	resp, err := http.Post(tw.url+"/add-checkpoint", "text/plain", bytes.NewReader(body))
	if err != nil {
		tw.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("Content-Type")
}

// mustCosign submits and requires a 200, returning the cosignature lines.
func (tw *testWitness) mustCosign(old uint64, proof [][]byte, cp []byte) string {
	tw.t.Helper()
	status, body, _ := tw.add(addBody(old, proof, cp))
	if status != http.StatusOK {
		tw.t.Fatalf("add-checkpoint old %d: %d %s", old, status, body)
	}
	return body
}

// mustConflict submits and requires a 409 naming size.
func (tw *testWitness) mustConflict(body []byte, size uint64) {
	tw.t.Helper()
	status, got, ctype := tw.add(body)
	if status != http.StatusConflict || got != strconv.FormatUint(size, 10)+"\n" || ctype != "text/x.tlog.size" {
		tw.t.Fatalf("got %d %q (%s), want 409 %q (text/x.tlog.size)", status, got, ctype, strconv.FormatUint(size, 10)+"\n")
	}
}

func logsOf(t testing.TB, ls ...*memLog) *Logs {
	t.Helper()
	logs := NewLogs()
	for _, l := range ls {
		if err := logs.AddLog("", l.vkey); err != nil {
			t.Fatal(err)
		}
	}
	return logs
}

func firstLine(s string) string { l, _, _ := strings.Cut(s, "\n"); return l }
