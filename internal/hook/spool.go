package hook

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
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

// spooled is one file of events/: the event as the hook made it, sent
// unchanged at every flush. (Files an earlier version wrote also carry the
// sequence and prev_hash it gave the event, and "assigned"; they are read
// and not sent: the service numbers the event.)
type spooled struct {
	Event api.NextEventInput `json:"event"`

	path string
}

func (s *Spool) eventsDir() string { return filepath.Join(s.Dir, "events") }

// Put writes ev to the spool. File names sort in the order events were
// spooled (ts first), so a flush sends them in that order.
func (s *Spool) Put(ev *api.NextEventInput) error {
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

// Flush sends the spooled events, oldest first, each as it was spooled,
// through the service's numbered append (POST /v1/events/append): the
// service gives each its place at the tip, so a flush reads no tip, meets
// no other writer's sequence, and goes on whatever sequence a client's own
// events took the tip to. A file is removed once the service answered for
// its event: stored now, answered with the event stored by an earlier
// attempt whose answer was lost (the same event sent again), or
// event_id_conflict (the derived id names this very call, on the record
// already). An event the service refuses for itself (422, 413) is moved to
// held/; any other failure ends the flush with the rest left for the next
// one. Only one flush runs at a time per spool: another caller gets Skipped.
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
	if max > 0 && len(rows) > max {
		rows = rows[:max]
	}
	var res FlushResult
	for _, r := range rows {
		err := svc.AppendNext(ctx, &r.Event)
		var pe *client.Error
		switch {
		case err == nil || client.IsCode(err, "event_id_conflict"):
			if err := os.Remove(r.path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return s.finish(res), err
			}
			res.Sent++
		case errors.As(err, &pe) && (pe.Status == http.StatusUnprocessableEntity || pe.Status == http.StatusRequestEntityTooLarge):
			// The event itself is refused: a resend cannot cure it, and
			// it must not stop the events after it.
			if err := s.hold(r); err != nil {
				return s.finish(res), err
			}
			res.Held++
		default:
			return s.finish(res), err
		}
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

// hold moves r to held/.
func (s *Spool) hold(r *spooled) error {
	if err := os.MkdirAll(s.heldDir(), 0o700); err != nil {
		return err
	}
	return os.Rename(r.path, filepath.Join(s.heldDir(), filepath.Base(r.path)))
}

// writeHint replaces path's content through a rename, without syncing: a
// hint lost in a crash only costs what it spares.
func writeHint(path string, data []byte) {
	f, err := os.CreateTemp(filepath.Dir(path), ".hint-*")
	if err != nil {
		if os.MkdirAll(filepath.Dir(path), 0o700) != nil {
			return
		}
		if f, err = os.CreateTemp(filepath.Dir(path), ".hint-*"); err != nil {
			return
		}
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
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
