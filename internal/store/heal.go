package store

// Chain heal and anchoring tables (migration 006, docs/decisions/heal.md and
// anchor.md): the scan's event stream in sequence order, heal_repairs (which
// findings a chain_repair event already answers) and anchors (RFC 3161
// receipts).

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
)

// scanColumns are the columns a heal scan needs: the hashed fields, the
// stored payload_hash and leaf_index, and whether the row was stored below
// the tip.
const scanColumns = `sequence, leaf_index, event_id, event_type, prev_hash, payload_hash, raw, decision, tool,
	machine_id, parent_id, signature, signature_key, ts, below_tip IS NOT NULL`

// ScanPage is how many events EventsBySequence reads per query.
const ScanPage = 2000

// EventsBySequence streams the account's events with sequence ≤ maxSequence
// in sequence order, calling fn for each, with memory flat in chain length.
//
// Decoding rows is the cost of a scan (the SQL driver spends microseconds per
// row), so pages are read by several goroutines at once: a dispatcher finds
// each page's last sequence with a cheap index probe (the ScanPage-th sequence
// after the previous page), readers fetch pages concurrently, and fn sees them
// strictly in order. At most readers+2 pages are alive at once. Only the
// columns a scan needs are filled (UserID is set; bookkeeping is not).
func (s *Store) EventsBySequence(ctx context.Context, userID string, maxSequence int64, fn func(*Event) error) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	readers := min(max(runtime.GOMAXPROCS(0), 1), 4)
	order := make(chan *scanFuture, readers) // pages in sequence order, read or being read
	work := make(chan *scanFuture)
	for range readers {
		wg.Go(func() {
			for f := range work {
				f.rows, f.err = s.scanRange(ctx, userID, f.lo, f.hi)
				close(f.done)
			}
		})
	}
	wg.Go(func() {
		defer close(order)
		defer close(work)
		lo := int64(math.MinInt64)
		for {
			f := &scanFuture{lo: lo, done: make(chan struct{})}
			hi, found, err := s.scanPageEnd(ctx, userID, lo, maxSequence)
			f.hi = hi
			if err != nil {
				f.err = err
				close(f.done)
			}
			select {
			case order <- f:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
			select {
			case work <- f:
			case <-ctx.Done():
				return
			}
			if !found || hi >= maxSequence {
				return
			}
			lo = hi
		}
	})
	for f := range order {
		select {
		case <-f.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if f.err != nil {
			return f.err
		}
		for i := range f.rows {
			if err := fn(&f.rows[i]); err != nil {
				return err
			}
		}
		f.rows = nil
	}
	return nil
}

// scanFuture is one page of EventsBySequence: sequences in (lo, hi].
type scanFuture struct {
	lo, hi int64
	done   chan struct{}
	rows   []Event
	err    error
}

// scanPageEnd returns the ScanPage-th sequence above lo (at most
// maxSequence); found is false when fewer remain, and hi is then maxSequence.
func (s *Store) scanPageEnd(ctx context.Context, userID string, lo, maxSequence int64) (hi int64, found bool, err error) {
	account, err := s.accountKey(ctx, nil, userID)
	if err != nil {
		return 0, false, err
	}
	err = s.read.QueryRowContext(ctx, scanPageEndSQL(s.Dialect), account, lo, maxSequence, ScanPage-1).Scan(&hi)
	if errors.Is(err, sql.ErrNoRows) {
		return maxSequence, false, nil
	}
	return hi, err == nil, err
}

// scanRange reads the events with sequence in (lo, hi], at most ScanPage.
func (s *Store) scanRange(ctx context.Context, userID string, lo, hi int64) ([]Event, error) {
	account, err := s.accountKey(ctx, nil, userID)
	if err != nil {
		return nil, err
	}
	rows, err := s.read.QueryContext(ctx, scanRangeSQL(s.Dialect), account, lo, hi)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	page := make([]Event, 0, ScanPage)
	for rows.Next() {
		var e Event
		e.UserID = userID
		var raw []byte // NULL stays nil; scanned once, not through a string
		if err := rows.Scan(&e.Sequence, &e.LeafIndex, &e.EventID, &e.EventType, &e.PrevHash, &e.PayloadHash, &raw,
			&e.Decision, &e.Tool, &e.MachineID, &e.ParentID, &e.Signature, &e.SignatureKey, &e.TS, &e.BelowTip); err != nil {
			return nil, err
		}
		e.Raw = raw
		page = append(page, e)
	}
	return page, rows.Err()
}

// HealRepair is a finding already answered by a chain_repair event.
type HealRepair struct {
	UserID         string
	FindingKey     string
	Kind           string
	RepairEventID  string
	RepairSequence int64
	CreatedAt      int64
}

// HealRepairByKey returns the repair of a finding, or ErrNotFound. q nil reads
// the read pool (dry runs); a heal run reads inside its transaction.
func (s *Store) HealRepairByKey(ctx context.Context, q Querier, userID, key string) (HealRepair, error) {
	if q == nil {
		q = s.read
	}
	r := HealRepair{UserID: userID, FindingKey: key}
	err := q.QueryRowContext(ctx, `SELECT kind, repair_event_id, repair_sequence, created_at FROM heal_repairs
		WHERE user_id = $1 AND finding_key = $2`, userID, key).Scan(&r.Kind, &r.RepairEventID, &r.RepairSequence, &r.CreatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return r, ErrNotFound
	}
	return r, err
}

// InsertHealRepair records a repair; ErrConflict when the finding already has one.
func (s *Store) InsertHealRepair(ctx context.Context, tx *sql.Tx, r HealRepair) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO heal_repairs (user_id, finding_key, kind, repair_event_id, repair_sequence, created_at)
		VALUES ($1, $2, $3, $4, $5, $6)`, r.UserID, r.FindingKey, r.Kind, r.RepairEventID, r.RepairSequence, r.CreatedAt)
	if IsUniqueViolation(err) {
		return ErrConflict
	}
	if err != nil {
		return fmt.Errorf("insert heal repair: %w", err)
	}
	return nil
}

// Anchor is a stored RFC 3161 receipt over one chain block.
type Anchor struct {
	UserID       string
	BlockIndex   int64
	TreeSize     int64
	RootHash     []byte
	BlockHash    []byte
	Provider     string
	TSAURL       string
	Token        []byte // DER TimeStampToken (CMS SignedData)
	GenTime      int64  // unix microseconds, as the TSA stated it
	SerialNumber string
	EventID      string // the anchor event that records the receipt on the chain
	ChainSize    int64  // the account's event count right after that event
	CreatedAt    int64
}

// LastAnchor returns the account's newest receipt, or ErrNotFound.
func (s *Store) LastAnchor(ctx context.Context, q Querier, userID string) (Anchor, error) {
	if q == nil {
		q = s.read
	}
	a := Anchor{UserID: userID}
	err := q.QueryRowContext(ctx, `SELECT block_index, tree_size, root_hash, block_hash, provider, tsa_url, token, gen_time,
		serial_number, event_id, chain_size, created_at FROM anchors WHERE user_id = $1 ORDER BY block_index DESC LIMIT 1`, userID).
		Scan(&a.BlockIndex, &a.TreeSize, &a.RootHash, &a.BlockHash, &a.Provider, &a.TSAURL, &a.Token, &a.GenTime,
			&a.SerialNumber, &a.EventID, &a.ChainSize, &a.CreatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return a, ErrNotFound
	}
	return a, err
}

// InsertAnchor stores a receipt; ErrConflict when the block already has one.
func (s *Store) InsertAnchor(ctx context.Context, tx *sql.Tx, a Anchor) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO anchors (user_id, block_index, tree_size, root_hash, block_hash, provider, tsa_url,
		token, gen_time, serial_number, event_id, chain_size, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
		a.UserID, a.BlockIndex, a.TreeSize, a.RootHash, a.BlockHash, a.Provider, a.TSAURL, a.Token, a.GenTime,
		a.SerialNumber, a.EventID, a.ChainSize, a.CreatedAt)
	if IsUniqueViolation(err) {
		return ErrConflict
	}
	if err != nil {
		return fmt.Errorf("insert anchor: %w", err)
	}
	return nil
}

// AccountIDs returns up to limit account ids above after, in id order (a
// keyset page for sweeps over every account).
func (s *Store) AccountIDs(ctx context.Context, after string, limit int) ([]string, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT user_id FROM accounts WHERE user_id > $1 ORDER BY user_id LIMIT $2`, after, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

func scanPageEndSQL(dialect Dialect) string {
	return bySequence(dialect, `sequence`, `account = $1 AND sequence > $2 AND sequence <= $3`) +
		` ORDER BY sequence LIMIT 1 OFFSET $4`
}

func scanRangeSQL(dialect Dialect) string {
	return bySequence(dialect, scanColumns, `account = $1 AND sequence > $2 AND sequence <= $3`) +
		` ORDER BY sequence`
}
