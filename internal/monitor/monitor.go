// Package monitor holds an account's log to what it showed before
// (docs/integrity.md "Monitor"): it keeps a pin — the newest checkpoint it
// accepted, its note in full, and the service key that signs it — and
// accepts a newer checkpoint only when it is signed by that key and the
// service proves (RFC 9162 consistency, checked here with pkg/verify) that
// the pinned tree is a prefix of the new one. A checkpoint of the pinned
// size with another root, a proof that does not verify, a smaller tree, or a
// signature that does not verify is an Alarm carrying both checkpoints as
// evidence: two notes signed by one key that cannot both be true are proof
// a third party can check without trusting the monitor.
//
// `auditchain monitor` runs Check on an interval; `auditchain chain verify
// --pin` runs it once.
package monitor

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/auditchain/auditchain/internal/durable"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/verify"
)

// Source is what the monitor reads of the service: *client.Client.
type Source interface {
	// ServicePublicKey is the key the service says signs its checkpoints;
	// read only on first use (trust on first use), never to check a pin.
	ServicePublicKey(ctx context.Context) (ed25519.PublicKey, error)
	// ConsistencyProof proves the tree of first leaves a prefix of the tree
	// of second (nil: the newest block's), with the blocks of both sizes.
	ConsistencyProof(ctx context.Context, first uint64, second *uint64) (*api.ConsistencyProof, error)
	// Blocks lists the account's blocks from the index cursor on (nil: the
	// first), oldest first, at most limit, with their cosignatures.
	Blocks(ctx context.Context, cursor *int64, limit int) (*api.BlockPage, error)
}

// StateVersion is the version of the state file's format.
const StateVersion = 1

// Key sources in State.KeySource.
const (
	KeyTrustedOnFirstUse = "trust_on_first_use" // read from the service when the state was created
	KeyGiven             = "given"              // --service-key
)

// State is the monitor's state file (JSON): the account, the service key
// it trusts and the newest checkpoint it accepted. auditchain monitor
// --state and auditchain chain verify --pin read and write the same file.
type State struct {
	Version      int    `json:"version"`
	Origin       string `json:"origin"`
	UserID       string `json:"user_id"`
	ServiceKey   string `json:"service_key"` // standard base64 of the Ed25519 public key
	ServiceKeyID string `json:"service_key_id"`
	KeySource    string `json:"key_source"`
	// Checkpoint is the pinned checkpoint; nil until one is accepted.
	Checkpoint *Checkpoint `json:"checkpoint"`
	PinnedAt   string      `json:"pinned_at,omitempty"`
}

// Checkpoint is one signed checkpoint as the monitor shows it: the note in
// full (what a third party verifies), the witnesses' cosignature lines, and
// what the note says.
type Checkpoint struct {
	BlockIndex   int64    `json:"block_index"`
	TreeSize     uint64   `json:"tree_size"`
	RootHash     string   `json:"root_hash"`
	Note         string   `json:"note"`
	Cosignatures []string `json:"cosignatures"`
}

// Alarm kinds.
const (
	KindSplitView    = "split_view"    // another root at the pinned size, or no consistency with the pin
	KindRollback     = "rollback"      // a tree smaller than the pinned one
	KindBadSignature = "bad_signature" // the newest checkpoint is not signed by the pinned key
)

// Alarm is the evidence of a log that does not hold to its pin: Pinned is
// the checkpoint accepted before (nil when nothing was pinned yet), Observed
// the one the service shows now.
type Alarm struct {
	Kind         string      `json:"kind"`
	Detail       string      `json:"detail"`
	Origin       string      `json:"origin"`
	ServiceKey   string      `json:"service_key"`
	ServiceKeyID string      `json:"service_key_id"`
	Pinned       *Checkpoint `json:"pinned"`
	Observed     *Checkpoint `json:"observed"`
	// AtPinnedSize, for a split view past the pinned size, is the block of
	// the pinned size the service showed with its proof, when it is signed
	// by the key and has another root than the pin: two notes of one size.
	AtPinnedSize *Checkpoint `json:"at_pinned_size,omitempty"`
	// Witnessed, with --witness, is a block before the newest that carries
	// the witnesses' quorum and contradicts the newest or the pin: the log
	// the witnesses were shown against the one this monitor was.
	Witnessed  *Checkpoint `json:"witnessed,omitempty"`
	DetectedAt string      `json:"detected_at"`
}

func (a *Alarm) Error() string { return fmt.Sprintf("%s: %s", a.Kind, a.Detail) }

// Outcomes of a Check that raised no alarm.
const (
	StatusPinned    = "pinned"    // first use: the newest checkpoint is now the pin
	StatusAdvanced  = "advanced"  // consistent growth: the pin moved forward
	StatusUnchanged = "unchanged" // the newest checkpoint is the pinned one
	// StatusAwaitingCosignatures: consistent, but the newest checkpoint
	// lacks the witness quorum, so the pin stays (the service's witness job
	// cosigns after the block is sealed).
	StatusAwaitingCosignatures = "awaiting_cosignatures"
	// StatusAdvancedToWitnessed: the newest checkpoint lacks the quorum,
	// and the pin moved to the newest earlier one that has it. On an
	// account that keeps appending, each read seals a new block before the
	// witness job has cosigned it, so the newest is rarely witnessed; the
	// blocks just before it are.
	StatusAdvancedToWitnessed = "advanced_to_witnessed"
)

// witnessedLookBack is how many blocks before the newest a check reads to
// find the newest one cosigned by the quorum: the witness job cosigns the
// newest sealed block every minute, so a monitor polling every minute
// finds it one or two blocks back.
const witnessedLookBack = 16

// Result is one Check: its outcome, the checkpoint observed, and with
// witnesses the quorum on it.
type Result struct {
	Status   string         `json:"status"`
	Origin   string         `json:"origin"`
	Observed *Checkpoint    `json:"observed"`
	Pinned   *Checkpoint    `json:"pinned"`
	Quorum   *verify.Quorum `json:"witnesses,omitempty"`
	Alarm    *Alarm         `json:"alarm,omitempty"`
}

// Options are a Check's trust settings.
type Options struct {
	// UserID, when not empty, is the account the state must be of and the
	// service must show.
	UserID string
	// ServiceKey, when not nil, is the key to trust instead of asking the
	// service on first use; it must be the state's key when there is one.
	ServiceKey ed25519.PublicKey
	// Witnesses and Quorum: a checkpoint is pinned only with Quorum valid
	// cosignatures of Witnesses.
	Witnesses []verify.Witness
	Quorum    int
	Now       func() time.Time
}

// ReadState reads a state file; a missing file is an empty state (first use).
func ReadState(path string) (*State, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &State{Version: StateVersion}, nil
	}
	if err != nil {
		return nil, err
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: not a monitor state file: %w", path, err)
	}
	if s.Version != StateVersion {
		return nil, fmt.Errorf("%s: state version %d, this program reads %d", path, s.Version, StateVersion)
	}
	return &s, nil
}

// WriteState writes the state so that a crash leaves the old pin or the
// new one (internal/durable).
func WriteState(path string, s *State) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return durable.WriteFile(path, append(b, '\n'), true)
}

// Check reads the account's newest checkpoint and holds it to the state's
// pin. It returns a Result with an Alarm (and leaves s as it was) when the
// log does not hold to the pin; otherwise it moves s's pin forward when the
// checkpoint is new and witnessed as required. An error is a check that
// could not be made (the service out of reach, a bad state): no evidence
// either way.
func Check(ctx context.Context, src Source, s *State, o Options) (*Result, error) {
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	if o.UserID != "" && s.UserID != "" && o.UserID != s.UserID {
		return nil, fmt.Errorf("the state is of account %s, not %s", s.UserID, o.UserID)
	}
	newest, err := src.ConsistencyProof(ctx, 0, nil)
	if err != nil {
		return nil, err
	}
	origin := newest.Origin
	switch {
	case s.Origin != "" && origin != s.Origin:
		return nil, fmt.Errorf("the service shows the log %q, the state pins %q (another account's API key?)", origin, s.Origin)
	case o.UserID != "" && origin != verify.Origin(o.UserID):
		return nil, fmt.Errorf("the service shows the log %q, not account %s's (another account's API key?)", origin, o.UserID)
	case newest.SecondCheckpoint == nil:
		return nil, fmt.Errorf("the account has no signed checkpoint yet")
	}
	pub, err := trustedKey(ctx, src, s, o.ServiceKey)
	if err != nil {
		return nil, err
	}
	obs := view(newest.SecondCheckpoint)
	res := &Result{Origin: origin, Observed: obs, Pinned: s.Checkpoint}
	alarm := func(kind, format string, a ...any) (*Result, error) {
		res.Status = "alarm"
		res.Alarm = &Alarm{Kind: kind, Detail: fmt.Sprintf(format, a...), Origin: origin,
			ServiceKey: base64.StdEncoding.EncodeToString(pub), ServiceKeyID: verify.ServiceKeyID(pub),
			Pinned: s.Checkpoint, Observed: obs, DetectedAt: now().UTC().Format(time.RFC3339)}
		return res, nil
	}
	cp, err := verify.OpenCheckpoint([]byte(obs.Note), pub, origin)
	if err != nil {
		return alarm(KindBadSignature, "the newest checkpoint (block %d) does not verify with the trusted service key %s: %v",
			obs.BlockIndex, verify.ServiceKeyID(pub), err)
	}
	// What the note signs is the checkpoint; the API's fields beside it are
	// only a convenience.
	obs.TreeSize, obs.RootHash = cp.Size, cp.Root.String()

	// The pinned checkpoint, opened once: a zero Checkpoint on first use.
	var pinned verify.Checkpoint
	if s.Checkpoint != nil {
		if pinned, err = verify.OpenCheckpoint([]byte(s.Checkpoint.Note), pub, origin); err != nil {
			return nil, fmt.Errorf("the pinned checkpoint does not verify with the state's key (the state file was altered?): %w", err)
		}
		switch {
		case cp.Size < pinned.Size:
			return alarm(KindRollback, "the newest checkpoint covers %d leaves, the pinned one %d: the log was rolled back",
				cp.Size, pinned.Size)
		case cp.Size == pinned.Size && cp.Root != pinned.Root:
			return alarm(KindSplitView, "two checkpoints of size %d with different roots (%s pinned, %s now), both signed by the service key",
				cp.Size, pinned.Root, cp.Root)
		case cp.Size == pinned.Size:
			res.Status = StatusUnchanged
			return res, nil
		}
		if r, err := extends(ctx, src, pub, origin, pinned, cp, true, alarm); r != nil || err != nil {
			return r, err
		}
	}
	res.Status = StatusAdvanced
	if s.Checkpoint == nil {
		res.Status = StatusPinned
	}
	if len(o.Witnesses) > 0 {
		q := verify.CheckQuorum([]byte(obs.Note), obs.Cosignatures, o.Witnesses, o.Quorum)
		res.Quorum = &q
		if !q.Met() {
			b, bq, alarmed, err := newestWitnessed(ctx, src, s, pinned, pub, origin, obs, cp, o, alarm)
			if alarmed != nil || err != nil {
				return alarmed, err
			}
			if b == nil {
				res.Status = StatusAwaitingCosignatures
				return res, nil
			}
			// The quorum reported is the pinned block's.
			obs, res.Quorum = b, bq
			if s.Checkpoint != nil {
				res.Status = StatusAdvancedToWitnessed
			}
		}
	}
	s.Version, s.Origin = StateVersion, origin
	if s.UserID == "" {
		s.UserID = o.UserID
		if s.UserID == "" {
			s.UserID = origin[len(verify.OriginPrefix):]
		}
	}
	s.Checkpoint, s.PinnedAt = obs, now().UTC().Format(time.RFC3339)
	res.Pinned = obs
	return res, nil
}

// alarmFunc raises an alarm of a check (its Result) with a detail.
type alarmFunc func(kind, format string, a ...any) (*Result, error)

// extends checks with the service's consistency proof that to, a signed
// checkpoint larger than from, extends it. It returns the alarm's Result
// when it does not (a split view), nil when it does. The roots are the
// signed notes', not the proof's: a proof only counts between two
// checkpoints the service signed. fromIsPin: from is the pinned checkpoint,
// and a block of its size the service shows with the proof, signed with
// another root, goes into the evidence (AtPinnedSize).
func extends(ctx context.Context, src Source, pub ed25519.PublicKey, origin string, from, to verify.Checkpoint, fromIsPin bool,
	alarm alarmFunc) (*Result, error) {
	size := to.Size
	p, err := src.ConsistencyProof(ctx, from.Size, &size)
	if err != nil {
		return nil, fmt.Errorf("consistency proof from %d to %d: %w", from.Size, size, err)
	}
	path := make([]verify.Hash, len(p.Proof))
	for i, h := range p.Proof {
		if err := path[i].UnmarshalText([]byte(h)); err != nil {
			return alarm(KindSplitView, "the consistency proof from %d to %d is malformed: %v", from.Size, size, err)
		}
	}
	if err := verify.VerifyConsistency(from.Size, to.Size, path, from.Root, to.Root); err != nil {
		res, _ := alarm(KindSplitView, "the checkpoint of size %d does not extend the one of size %d: %v", size, from.Size, err)
		if fromIsPin && p.FirstCheckpoint != nil {
			if other, err := verify.OpenCheckpoint([]byte(p.FirstCheckpoint.Note), pub, origin); err == nil &&
				other.Size == from.Size && other.Root != from.Root {
				res.Alarm.AtPinnedSize = view(p.FirstCheckpoint)
				res.Alarm.Detail += fmt.Sprintf("; the service also signed size %d with root %s", other.Size, other.Root)
			}
		}
		return res, nil
	}
	return nil, nil
}

// newestWitnessed finds, among the blocks before newest (at most
// witnessedLookBack, none at or below the pinned block), the newest one
// carrying the quorum, and holds it to what the check already holds: it
// must be signed by the trusted key and be a prefix of the newest, newestCP
// (proven by the service's consistency proof), which was proven to extend
// the pin, so it extends the pin too. It returns that block (its size and
// root read from its note) and its quorum; nil when none is past the pin;
// or the alarm's Result, with the block as Witnessed, when it contradicts
// the newest or the pin (a signature that does not verify, a larger tree
// than the newest, another root at one size, no consistency): the service
// shows the witnesses one log and this monitor another. pinned is s's pin as
// Check opened it (zero on first use).
func newestWitnessed(ctx context.Context, src Source, s *State, pinned verify.Checkpoint, pub ed25519.PublicKey, origin string, newest *Checkpoint,
	newestCP verify.Checkpoint, o Options, alarm alarmFunc) (*Checkpoint, *verify.Quorum, *Result, error) {
	from := max(newest.BlockIndex-witnessedLookBack, 0)
	if s.Checkpoint != nil {
		from = max(from, s.Checkpoint.BlockIndex+1)
	}
	if from >= newest.BlockIndex {
		return nil, nil, nil, nil
	}
	page, err := src.Blocks(ctx, &from, int(newest.BlockIndex-from))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("blocks from %d: %w", from, err)
	}
	witnessed := func(b *Checkpoint, kind, format string, a ...any) (*Checkpoint, *verify.Quorum, *Result, error) {
		r, err := alarm(kind, format, a...)
		r.Alarm.Witnessed = b
		return nil, nil, r, err
	}
	for i := len(page.Blocks) - 1; i >= 0; i-- {
		b := view(&page.Blocks[i])
		if b.BlockIndex >= newest.BlockIndex || b.BlockIndex < from {
			continue
		}
		q := verify.CheckQuorum([]byte(b.Note), b.Cosignatures, o.Witnesses, o.Quorum)
		if !q.Met() {
			continue
		}
		cp, err := verify.OpenCheckpoint([]byte(b.Note), pub, origin)
		if err != nil {
			return witnessed(b, KindBadSignature, "block %d, cosigned by the witnesses, does not verify with the trusted service key %s: %v",
				b.BlockIndex, verify.ServiceKeyID(pub), err)
		}
		b.TreeSize, b.RootHash = cp.Size, cp.Root.String()
		switch {
		case cp.Size > newestCP.Size:
			return witnessed(b, KindRollback, "block %d, cosigned by the witnesses, covers %d leaves, the newest checkpoint %d: the log was rolled back below what the witnesses cosigned",
				b.BlockIndex, cp.Size, newestCP.Size)
		case cp.Size == newestCP.Size && cp.Root != newestCP.Root:
			return witnessed(b, KindSplitView, "two checkpoints of size %d with different roots (%s cosigned by the witnesses, %s now), both signed by the service key",
				cp.Size, cp.Root, newestCP.Root)
		case s.Checkpoint != nil && cp.Size == pinned.Size && cp.Root != pinned.Root:
			return witnessed(b, KindSplitView, "two checkpoints of size %d with different roots (%s pinned, %s cosigned by the witnesses), both signed by the service key",
				cp.Size, pinned.Root, cp.Root)
		case s.Checkpoint != nil && cp.Size <= pinned.Size:
			return nil, nil, nil, nil // the newest witnessed is not past the pin
		case cp.Size < newestCP.Size:
			if r, err := extends(ctx, src, pub, origin, cp, newestCP, false, alarm); r != nil || err != nil {
				if r != nil && r.Alarm != nil {
					r.Alarm.Witnessed = b
				}
				return nil, nil, r, err
			}
		}
		return b, &q, nil, nil
	}
	return nil, nil, nil, nil
}

// trustedKey is the state's key; on first use the given one, else the
// service's own answer (trust on first use), recorded in s.
func trustedKey(ctx context.Context, src Source, s *State, given ed25519.PublicKey) (ed25519.PublicKey, error) {
	if s.ServiceKey != "" {
		b, err := base64.StdEncoding.DecodeString(s.ServiceKey)
		if err != nil || len(b) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("the state's service_key is not the standard base64 of an Ed25519 public key")
		}
		pub := ed25519.PublicKey(b)
		if given != nil && !pub.Equal(given) {
			return nil, fmt.Errorf("the state trusts the service key %s, not the given %s", verify.ServiceKeyID(pub), verify.ServiceKeyID(given))
		}
		return pub, nil
	}
	pub, source := given, KeyGiven
	if pub == nil {
		var err error
		if pub, err = src.ServicePublicKey(ctx); err != nil {
			return nil, err
		}
		source = KeyTrustedOnFirstUse
	}
	s.ServiceKey, s.ServiceKeyID, s.KeySource = base64.StdEncoding.EncodeToString(pub), verify.ServiceKeyID(pub), source
	return pub, nil
}

func view(b *api.Block) *Checkpoint {
	cos := b.Cosignatures
	if cos == nil {
		cos = []string{}
	}
	return &Checkpoint{BlockIndex: b.Index, TreeSize: uint64(max(b.TreeSize, 0)), RootHash: b.RootHash, Note: b.Note, Cosignatures: cos}
}
