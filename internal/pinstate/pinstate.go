// Package pinstate is the pinned state of a store (docs/operations.md
// "Pinned state"): for every account, the newest chain block when the pin was
// taken, signed by the service key. A store restored from an older backup
// has blocks below the pin, or other blocks at its sizes; Compare says which
// accounts, so `admin check --pin-state` and `serve --pin-state` make such a
// rollback loud instead of silent.
//
// The file is a C2SP signed note, like a chain block, signed by the service
// identity key under the name Name (internal/checkpoint signs, pkg/verify
// opens it):
//
//	auditchain/pin-state
//	service-key svc-0123456789abcdef
//	pinned-at 2026-11-27T10:00:00Z
//	<user_id> <block index> <tree size> <root hash> <block hash>
//	…                                          (one line per account)
//
//	— auditchain/pin-state <base64(key hash || Ed25519 signature)>
package pinstate

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/auditchain/auditchain/internal/checkpoint"
	"github.com/auditchain/auditchain/internal/merkle"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/verify"
)

// Name is the note key name and the first line of a pin. Account origins
// are "auditchain/<uuid>", so a pin can never pass for a chain block.
const Name = "auditchain/pin-state"

// Account is one account's pinned newest block.
type Account struct {
	UserID     string
	BlockIndex int64
	TreeSize   uint64
	Root       verify.Hash
	BlockHash  verify.Hash
}

// State is a pin: the service key that signed it, when it was taken, and
// the pinned accounts (those that had a block then), in user_id order.
type State struct {
	ServiceKeyID string
	PinnedAt     time.Time
	Accounts     []Account
}

// Sign returns the pin as a signed note.
func Sign(s State, key ed25519.PrivateKey) ([]byte, error) {
	signer, err := checkpoint.NewSigner(Name, key)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\nservice-key %s\npinned-at %s\n", Name, s.ServiceKeyID, s.PinnedAt.UTC().Format(time.RFC3339))
	for _, a := range s.Accounts {
		fmt.Fprintf(&b, "%s %d %d %s %s\n", a.UserID, a.BlockIndex, a.TreeSize, a.Root, a.BlockHash)
	}
	return note.Sign(&note.Note{Text: b.String()}, signer)
}

// ErrSignature is wrapped by Open when the pin is not signed by the given key.
var ErrSignature = errors.New("the pin is not signed by this service key")

// Open verifies the pin's signature with the service public key and parses it.
func Open(signed []byte, pub ed25519.PublicKey) (State, error) {
	v, err := verify.CheckpointVerifier(Name, pub)
	if err != nil {
		return State{}, err
	}
	n, err := note.Open(signed, note.VerifierList(v))
	if err != nil {
		var unverified *note.UnverifiedNoteError
		var invalid *note.InvalidSignatureError
		if errors.As(err, &invalid) {
			return State{}, fmt.Errorf("%w (%s): the signature does not match the text (the file was altered)", ErrSignature, verify.ServiceKeyID(pub))
		}
		if errors.As(err, &unverified) {
			s, perr := parse(unverified.Note.Text)
			if perr == nil {
				return State{}, fmt.Errorf("%w (%s): the pin names %s", ErrSignature, verify.ServiceKeyID(pub), s.ServiceKeyID)
			}
			return State{}, fmt.Errorf("%w (%s)", ErrSignature, verify.ServiceKeyID(pub))
		}
		return State{}, fmt.Errorf("not a pin-state file: %w", err)
	}
	return parse(n.Text)
}

func parse(text string) (State, error) {
	bad := func(format string, a ...any) (State, error) {
		return State{}, fmt.Errorf("not a pin-state file: "+format, a...)
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) < 3 || lines[0] != Name {
		return bad("it does not start with %q", Name)
	}
	var s State
	var ok bool
	if s.ServiceKeyID, ok = strings.CutPrefix(lines[1], "service-key "); !ok {
		return bad("line 2 is not service-key")
	}
	at, ok := strings.CutPrefix(lines[2], "pinned-at ")
	t, err := time.Parse(time.RFC3339, at)
	if !ok || err != nil {
		return bad("line 3 is not pinned-at TIME")
	}
	s.PinnedAt = t
	for i, l := range lines[3:] {
		f := strings.Fields(l)
		if len(f) != 5 {
			return bad("line %d has %d fields, want 5", i+4, len(f))
		}
		a := Account{UserID: f[0]}
		idx, err1 := strconv.ParseInt(f[1], 10, 64)
		size, err2 := strconv.ParseUint(f[2], 10, 64)
		err3 := a.Root.UnmarshalText([]byte(f[3]))
		err4 := a.BlockHash.UnmarshalText([]byte(f[4]))
		if err := errors.Join(err1, err2, err3, err4); err != nil {
			return bad("line %d: %v", i+4, err)
		}
		a.BlockIndex, a.TreeSize = idx, size
		s.Accounts = append(s.Accounts, a)
	}
	return s, nil
}

// Take reads the newest block of every account that has one. Blocks are
// sealed lazily, so the caller seals first when the pin must cover every
// event stored (admin pin does).
func Take(ctx context.Context, st *store.Store, serviceKeyID string, now time.Time, userIDs []string) (State, error) {
	s := State{ServiceKeyID: serviceKeyID, PinnedAt: now}
	for _, id := range userIDs {
		b, err := st.LastBlock(ctx, nil, id)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return State{}, err
		}
		s.Accounts = append(s.Accounts, Account{UserID: id, BlockIndex: b.Index, TreeSize: b.Size, Root: b.Root, BlockHash: b.Hash})
	}
	return s, nil
}

// Statuses of a pinned account in Compare.
const (
	StatusOK         = "ok"          // the store holds the pinned block and its tree
	StatusMissing    = "missing"     // the account is not in the store
	StatusRolledBack = "rolled_back" // the store's newest block or chain is below the pinned size
	StatusDiverged   = "diverged"    // the store has another block or tree at the pinned size
)

// Result is one pinned account against the store.
type Result struct {
	Pinned Account
	Status string
	Detail string // empty when ok
}

// Compare holds every pinned account against the store: its newest block
// must be at or past the pinned size, the block of the pinned size must be
// the pinned one (index, root and block hash), and the stored Merkle tree
// must give the pinned root at that size, so the chain grew from the pinned
// state and nothing was rolled back or replaced. It reads only.
func Compare(ctx context.Context, st *store.Store, s State) ([]Result, error) {
	out := make([]Result, 0, len(s.Accounts))
	for _, p := range s.Accounts {
		r, err := compare(ctx, st, p)
		if err != nil {
			return nil, fmt.Errorf("account %s: %w", p.UserID, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func compare(ctx context.Context, st *store.Store, p Account) (Result, error) {
	res := func(status, format string, a ...any) (Result, error) {
		return Result{Pinned: p, Status: status, Detail: fmt.Sprintf(format, a...)}, nil
	}
	if _, err := st.Account(ctx, p.UserID); errors.Is(err, store.ErrNotFound) {
		return res(StatusMissing, "the account is not in the store; the pin has its block %d at tree size %d", p.BlockIndex, p.TreeSize)
	} else if err != nil {
		return Result{}, err
	}
	last, err := st.LastBlock(ctx, nil, p.UserID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return res(StatusRolledBack, "the store has no block; the pin has block %d at tree size %d", p.BlockIndex, p.TreeSize)
	case err != nil:
		return Result{}, err
	case last.Size < p.TreeSize:
		return res(StatusRolledBack, "the newest block %d covers %d events; the pin has block %d at tree size %d", last.Index, last.Size, p.BlockIndex, p.TreeSize)
	}
	head, err := st.Head(ctx, p.UserID)
	if err != nil {
		return Result{}, err
	}
	if head.EventCount < int64(p.TreeSize) {
		return res(StatusRolledBack, "the chain holds %d events; the pin has tree size %d", head.EventCount, p.TreeSize)
	}
	b, err := st.BlockBySize(ctx, p.UserID, int64(p.TreeSize))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return res(StatusDiverged, "the store has no block of the pinned tree size %d", p.TreeSize)
	case err != nil:
		return Result{}, err
	case b.Index != p.BlockIndex || b.Root != p.Root || b.Hash != p.BlockHash:
		return res(StatusDiverged, "the store's block of tree size %d is block %d with root %s and hash %s; the pin has block %d with root %s and hash %s",
			p.TreeSize, b.Index, b.Root, b.Hash, p.BlockIndex, p.Root, p.BlockHash)
	}
	root, err := merkle.Root(int64(p.TreeSize), st.HashReader(ctx, nil, p.UserID))
	switch {
	case errors.Is(err, store.ErrMissingHash) || errors.Is(err, store.ErrMalformedHash):
		return res(StatusDiverged, "the stored Merkle tree of size %d is incomplete or malformed: %v", p.TreeSize, err)
	case err != nil:
		return Result{}, err
	case root != p.Root:
		return res(StatusDiverged, "the stored Merkle tree gives root %s at the pinned size %d; the pin has %s", root, p.TreeSize, p.Root)
	}
	return Result{Pinned: p, Status: StatusOK}, nil
}
