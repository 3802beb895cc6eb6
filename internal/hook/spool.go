package hook

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/verify"
)

// Spool is a directory of events the hook could not send (docs/hooks.md
// "Spool"): one file per event under events/, written atomically (a
// temporary file, then rename), removed only once the service answered for
// it. It also keeps, under calls/, the tool_call ids of hosts that send no
// tool-use id, so that the tool_result can name its parent.
type Spool struct {
	Dir string
}

// DefaultSpoolDir is auditchain/hook-spool under the user's cache directory.
func DefaultSpoolDir() string {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "auditchain", "hook-spool")
}

// AccountSpoolDir is the spool of one service and API key under base: a
// directory named by a digest of the two (never the key itself), so that
// events spooled for one account are never sent with another's key.
func AccountSpoolDir(base, serviceURL, apiKey string) string {
	h := sha256.Sum256([]byte(idVersion + "\x00" + strings.TrimRight(serviceURL, "/") + "\x00" + apiKey))
	return filepath.Join(base, hex.EncodeToString(h[:8]))
}

// spooled is one file of events/.
type spooled struct {
	// Assigned: Event's sequence and prev_hash were given at a flush and
	// the row may have been stored; it is resent exactly as it is.
	Assigned bool           `json:"assigned"`
	Event    api.EventInput `json:"event"`

	path string
}

func (s *Spool) eventsDir() string { return filepath.Join(s.Dir, "events") }

// Put writes ev to the spool. File names sort in the order events were
// spooled (ts first), so a flush sends them in that order.
func (s *Spool) Put(ev *api.EventInput) error {
	ts := ""
	if ev.TS != nil {
		ts = strings.NewReplacer(":", "", "-", "", "+", "", ".", "").Replace(*ev.TS)
	}
	return s.write(&spooled{Event: *ev, path: filepath.Join(s.eventsDir(), ts+"-"+ev.EventID+".json")})
}

func (s *Spool) write(r *spooled) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return writeAtomic(r.path, b, 0o600)
}

// writeAtomic writes data to path through a temporary file in the same
// directory, synced and renamed: a reader sees the old file or the new one.
func writeAtomic(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, perm)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// Pending reports whether events wait in the spool (one directory read).
func (s *Spool) Pending() bool {
	d, err := os.Open(s.eventsDir())
	if err != nil {
		return false
	}
	defer d.Close()
	names, _ := d.Readdirnames(8)
	for _, n := range names {
		if strings.HasSuffix(n, ".json") {
			return true
		}
	}
	return false
}

func (s *Spool) load() ([]*spooled, error) {
	ents, err := os.ReadDir(s.eventsDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*spooled
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		p := filepath.Join(s.eventsDir(), e.Name())
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		r := &spooled{path: p}
		if err := json.Unmarshal(b, r); err != nil {
			return nil, fmt.Errorf("spool file %s: %w", p, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// FlushResult counts what a flush did.
type FlushResult struct {
	Sent    int // rows the service answered for (stored, or stored before)
	Left    int // rows still in the spool
	Held    int // rows the service refused (moved to held/ by this flush)
	Skipped bool
}

// heldDir keeps rows the service refused for a reason a resend cannot cure
// (a problem with the row itself): out of the way of the rows after them,
// for the operator to read.
func (s *Spool) heldDir() string { return filepath.Join(s.Dir, "held") }

// Flush sends the spooled events through the batch route, one row per
// request. Rows get their sequence and prev_hash at the flush, continuing
// the chain tip, and are written back before they are sent, so that a flush
// whose answer is lost resends identical rows (the service skips them). A
// row is removed once the service stored it (ingested or skipped) or names
// its event_id as already stored. When another writer took a row's sequence
// meanwhile, that row and every later one are given new sequences from the
// tip read again: a row is only ever sent after the row it links to was
// stored, so a concurrent writer can never leave a stored row pointing at
// one that is not (the batch route checks rows for shape only). Only one
// flush runs at a time per spool: another caller gets Skipped.
func (s *Spool) Flush(ctx context.Context, svc Service) (FlushResult, error) {
	return s.FlushUpTo(ctx, svc, 0)
}

// FlushUpTo is Flush sending at most max rows (0: all), oldest first: a
// hook run flushes a few after its own call, and leaves the rest to the
// next runs or to `auditchain hook flush`, so that no tool call waits for a
// long spool.
func (s *Spool) FlushUpTo(ctx context.Context, svc Service, max int) (FlushResult, error) {
	unlock, ok, err := lockDir(s.Dir)
	if err != nil || !ok {
		return FlushResult{Skipped: !ok}, err
	}
	defer unlock()
	rows, err := s.load()
	if err != nil {
		return FlushResult{}, err
	}
	// Rows assigned by an earlier flush first, exactly as they were sent
	// (the files sort in spooling order; assigned rows come first in it).
	slices.SortStableFunc(rows, func(a, b *spooled) int {
		switch {
		case a.Assigned == b.Assigned:
			return 0
		case a.Assigned:
			return -1
		}
		return 1
	})
	if max > 0 && len(rows) > max {
		rows = rows[:max]
	}
	var res FlushResult
	for attempt := 0; len(rows) > 0 && attempt < 4; attempt++ {
		batch := rows
		if n := slices.IndexFunc(rows, func(r *spooled) bool { return !r.Assigned }); n > 0 {
			// The rows an earlier flush numbered go first, as they were
			// sent; the others are numbered after them, from the tip.
			batch, rows = rows[:n], rows[n:]
		} else {
			if n == 0 {
				tip, err := svc.Tip(ctx)
				if err != nil {
					return s.finish(res), err
				}
				if err := s.assign(rows, tip); err != nil {
					return s.finish(res), err
				}
			}
			rows = nil
		}
		again, err := s.send(ctx, svc, batch, &res)
		if err != nil {
			return s.finish(res), err
		}
		rows = append(again, rows...)
	}
	return s.finish(res), nil
}

// finish counts the rows still spooled.
func (s *Spool) finish(res FlushResult) FlushResult {
	if rows, err := s.load(); err == nil {
		res.Left = len(rows)
	}
	return res
}

// assign gives rows consecutive sequences after tip, each linked to the one
// before, and writes them back.
func (s *Spool) assign(rows []*spooled, tip *api.ChainTip) error {
	seq := int64(-1)
	var prev *string
	if tip.Sequence != nil {
		seq, prev = *tip.Sequence, tip.PayloadHash
	}
	for _, r := range rows {
		seq++
		e := &r.Event
		e.Sequence, e.PrevHash = seq, prev
		h, err := verify.PayloadHash(&verify.HashedEvent{EventID: e.EventID, EventType: e.EventType, Sequence: e.Sequence,
			PrevHash: e.PrevHash, Raw: e.Raw, Decision: e.Decision, Tool: e.Tool, MachineID: e.MachineID,
			ParentID: e.ParentID, TS: e.TS, Signature: e.Signature, SignatureKey: e.SignatureKey})
		if err != nil {
			return err
		}
		prev = &h
		r.Assigned = true
		if err := s.write(r); err != nil {
			return err
		}
	}
	return nil
}

// send posts rows one by one, in order, and returns the rows to assign
// again: from the first whose sequence was taken (or which was refused for
// another reason, which stays in the spool as it is and is left out of this
// flush) to the end.
func (s *Spool) send(ctx context.Context, svc Service, rows []*spooled, res *FlushResult) ([]*spooled, error) {
	for i, r := range rows {
		out, err := svc.AppendBatch(ctx, []api.EventInput{r.Event})
		if err != nil {
			return nil, err
		}
		var refusal *api.BatchRowError
		if len(out.Errors) > 0 {
			refusal = &out.Errors[0]
		}
		if refusal == nil || refusal.Code == "event_id_conflict" {
			// Stored now, or stored before (event ids are derived from the
			// host's ids, so the id names this very call).
			if err := os.Remove(r.path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, err
			}
			res.Sent++
			continue
		}
		rest := rows[i:]
		if refusal.Code != "sequence_taken" {
			// Held for the operator to see; the rows after it link to it,
			// so they are numbered again without it.
			if err := s.hold(r); err != nil {
				return nil, err
			}
			res.Held++
			rest = rows[i+1:]
		}
		for _, r := range rest {
			r.Assigned = false
			if err := s.write(r); err != nil {
				return nil, err
			}
		}
		return rest, nil
	}
	return nil, nil
}

// hold moves r to held/.
func (s *Spool) hold(r *spooled) error {
	if err := os.MkdirAll(s.heldDir(), 0o700); err != nil {
		return err
	}
	return os.Rename(r.path, filepath.Join(s.heldDir(), filepath.Base(r.path)))
}

// callsDir keeps pairing files for hosts without tool-use ids: one file per
// call that may run, named by pairKey and holding the call's derived id,
// until its result claims it (renamed to name.<claim>.taken) and a later
// result sweeps the claim away.
func (s *Spool) callsDir() string { return filepath.Join(s.Dir, "calls") }

// Pairing files are swept by age: a claimed one once every hook run for
// that result has surely read it (the host runs them together, within its
// timeout), an unclaimed one (the tool never ran: the user cancelled it, or
// the host stopped) after a day, which a tool call outliving loses its
// parent.
const (
	claimedPairTTL   = 10 * time.Minute
	unclaimedPairTTL = 24 * time.Hour
)

// pairKey names the pairing file of a call: host, session, tool and input
// digest, what the before-tool and the after-tool stdin share.
func pairKey(c *Call) string {
	digest, _ := c.inputDigest()
	h := sha256.Sum256([]byte(c.Host + "\x00" + c.SessionID + "\x00" + c.Tool + "\x00" + digest))
	return hex.EncodeToString(h[:16])
}

// RememberCall keeps c's derived tool-use id until its result. Every hook
// process of one event writes the same id. The file is written without a
// sync, as the tip hint is: one lost in a crash only costs the result its
// parent, and the call waits for no disk flush.
func (s *Spool) RememberCall(c *Call) error {
	if err := os.MkdirAll(s.callsDir(), 0o700); err != nil {
		return err
	}
	writeHint(filepath.Join(s.callsDir(), pairKey(c)), []byte(c.ToolUseID))
	return nil
}

// TakeCall returns the id RememberCall kept for the call whose result c
// reports ("" when there is none). The first hook process of the result
// claims the file by renaming it to a name derived from the result's own
// stdin; any other process of the same result reads the claimed file, so
// all of them name the same call, and the next identical call starts from
// a fresh file.
func (s *Spool) TakeCall(c *Call, now time.Time) string {
	key := pairKey(c)
	stamp := sha256.Sum256([]byte(c.Event + "\x00" + c.Stamp))
	claimed := filepath.Join(s.callsDir(), key+"."+hex.EncodeToString(stamp[:8])+".taken")
	b, err := os.ReadFile(claimed)
	if errors.Is(err, os.ErrNotExist) {
		if os.Rename(filepath.Join(s.callsDir(), key), claimed) == nil {
			// The claim's age counts from now, not from the call: the
			// other processes of this result still have to read it.
			os.Chtimes(claimed, now, now)
		}
		// Claimed now, by this process or by another between the two
		// steps, or there is nothing to claim.
		b, err = os.ReadFile(claimed)
	}
	s.sweepCalls(now)
	if err != nil {
		return ""
	}
	return string(b)
}

// sweepCalls removes the pairing files past their age (one directory read).
func (s *Spool) sweepCalls(now time.Time) {
	ents, err := os.ReadDir(s.callsDir())
	if err != nil {
		return
	}
	for _, e := range ents {
		ttl := unclaimedPairTTL
		if strings.HasSuffix(e.Name(), ".taken") {
			ttl = claimedPairTTL
		}
		if fi, err := e.Info(); err == nil && now.Sub(fi.ModTime()) > ttl {
			os.Remove(filepath.Join(s.callsDir(), e.Name()))
		}
	}
}
