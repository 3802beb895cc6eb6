package bench

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/transparency-dev/formats/log"
	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/auditchain/auditchain/pkg/verify"
)

// runWitness measures `auditchain witness serve`: --accounts account logs
// of an auditchain service whose key only the generator holds (origins
// auditchain/<uuid>, the witness started with --auditchain-service), each
// an RFC 6962 tree in the generator's memory. An operation appends one leaf
// to one of the client's logs, signs its checkpoint and sends it with the
// consistency proof from the size the witness last cosigned
// (POST /add-checkpoint); a 200 is one cosignature, checked with
// transparency-dev/formats' cosignature/v1 verifier on each log's first.
func runWitness(ctx context.Context, e *env, res Result) (Result, error) {
	if e.o.URL != "" {
		return res, errors.New("the witness workload starts its own `auditchain witness serve` (it trusts a service key only the generator holds): drop --url")
	}
	nLogs := max(res.Accounts, e.clients)
	res.Accounts = nLogs
	dir, err := os.MkdirTemp("", "auditchain-bench-witness-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	keyFile := filepath.Join(dir, "witness.key")
	out, err := exec.CommandContext(ctx, e.o.Exe, "witness", "keygen", "--out", keyFile, "--name", "bench.witness.test/w1").Output()
	if err != nil {
		return res, fmt.Errorf("witness keygen: %w", err)
	}
	cosigner, err := fnote.NewVerifierForCosignatureV1(strings.TrimSpace(string(out)))
	if err != nil {
		return res, fmt.Errorf("witness keygen printed %q: %w", out, err)
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return res, err
	}
	srv, err := startListening(ctx, e.o.ServerWrap, append([]string{e.o.Exe, "witness", "serve",
		"--key", keyFile, "--db", filepath.Join(dir, "witness.db"), "--create-db", "--listen", "127.0.0.1:0",
		"--auditchain-service", base64.StdEncoding.EncodeToString(pub), "--log-level", "warn"}, e.o.ServerArgs...),
		filepath.Join(dir, "witness.log"), "auditchain witness listening on ")
	if err != nil {
		return res, err
	}
	defer func() {
		if err := srv.stop(); err != nil && res.Error == "" {
			res.Error = "witness: " + err.Error()
		}
	}()
	e.serverPID = srv.pid
	fmt.Fprintf(e.progress, "bench: witness pid %d at %s, %d logs\n", srv.pid, srv.url, nLogs)
	c := newClient(srv.url, e.clients)
	defer c.close()
	e.c, e.cs = c, []*client{c}

	logs := make([]*benchLog, nLogs)
	for i := range logs {
		if logs[i], err = newBenchLog(verify.Origin(uuid.NewString()), pub, priv); err != nil {
			return res, err
		}
	}
	mk := func(w *worker) opFunc {
		var mine []*benchLog
		for i := w.id; i < len(logs); i += e.clients {
			mine = append(mine, logs[i])
		}
		next := 0
		return func(ctx context.Context, w *worker) (int, error) {
			l := mine[next%len(mine)]
			next++
			cp, body, err := l.grow()
			if err != nil {
				return 0, err
			}
			_, err = w.c.do(ctx, "POST", "/add-checkpoint", "", body, &w.resp)
			var se *statusError
			if errors.As(err, &se) && se.status == 409 {
				// The witness holds another size (a request it answered
				// that this side never read): go on from there.
				if n, perr := strconv.ParseUint(strings.TrimSpace(w.resp.String()), 10, 64); perr == nil && n <= l.size {
					l.cosigned = n
				}
			}
			if err != nil {
				return 0, err
			}
			if !l.checked {
				n, err := note.Open(append(cp, w.resp.Bytes()...), note.VerifierList(cosigner))
				if err != nil || len(n.Sigs) != 1 {
					return 0, errAbort{fmt.Errorf("the witness's answer is not a cosignature by its key: %q (%v)", w.resp.String(), err)}
				}
				l.checked = true
			}
			l.cosigned = l.size
			return 1, nil
		}
	}
	fmt.Fprintf(e.progress, "bench: %s: %d clients, %s mode, %v\n", e.w.name, e.clients, res.Mode, e.o.Duration)
	lr := drive(ctx, e, mk, e.rate)
	lr.fill(&res)
	return res, nil
}

// benchLog is one account log as the generator keeps it: the tree's stored
// hashes (tlog's layout) and the size the witness last cosigned.
type benchLog struct {
	signer   *serviceSigner
	stored   []tlog.Hash
	size     uint64
	cosigned uint64
	checked  bool
}

func newBenchLog(origin string, pub ed25519.PublicKey, priv ed25519.PrivateKey) (*benchLog, error) {
	v, err := verify.CheckpointVerifier(origin, pub)
	if err != nil {
		return nil, err
	}
	return &benchLog{signer: &serviceSigner{name: origin, hash: v.KeyHash(), key: priv}}, nil
}

func (l *benchLog) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		out[i] = l.stored[x]
	}
	return out, nil
}

// grow appends a leaf and returns the new signed checkpoint and the
// add-checkpoint body that submits it from the cosigned size.
func (l *benchLog) grow() (cp, body []byte, err error) {
	hs, err := tlog.StoredHashes(int64(l.size), strconv.AppendUint([]byte("leaf "), l.size, 10), l)
	if err != nil {
		return nil, nil, err
	}
	l.stored = append(l.stored, hs...)
	l.size++
	root, err := tlog.TreeHash(int64(l.size), l)
	if err != nil {
		return nil, nil, err
	}
	cp, err = note.Sign(&note.Note{Text: string(log.Checkpoint{Origin: l.signer.name, Size: l.size, Hash: root[:]}.Marshal())}, l.signer)
	if err != nil {
		return nil, nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "old %d\n", l.cosigned)
	if l.cosigned > 0 {
		proof, err := tlog.ProveTree(int64(l.size), int64(l.cosigned), l)
		if err != nil {
			return nil, nil, err
		}
		for _, h := range proof {
			b.WriteString(base64.StdEncoding.EncodeToString(h[:]))
			b.WriteByte('\n')
		}
	}
	b.WriteByte('\n')
	b.Write(cp)
	return cp, b.Bytes(), nil
}

// serviceSigner signs as an auditchain service signs an account's
// checkpoints: Ed25519 under the origin's name (pkg/verify
// CheckpointVerifierKey).
type serviceSigner struct {
	name string
	hash uint32
	key  ed25519.PrivateKey
}

func (s *serviceSigner) Name() string                    { return s.name }
func (s *serviceSigner) KeyHash() uint32                 { return s.hash }
func (s *serviceSigner) Sign(msg []byte) ([]byte, error) { return ed25519.Sign(s.key, msg), nil }
