package witness

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/url"
	"sync"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	"github.com/auditchain/auditchain/pkg/verify"
)

// Record is the witness's record of one log: the latest checkpoint it
// cosigned (tlog-witness: "For each log, uniquely identified by its origin
// line, the witness is only required to keep track of the latest checkpoint
// it observed and verified").
type Record struct {
	Origin string
	Size   uint64
	Root   verify.Hash
	// Checkpoint is the checkpoint as cosigned: its body, the log's
	// signatures the witness verified, and the witness's cosignature.
	Checkpoint []byte
	// found is false for a log never cosigned (size 0, no row).
	found bool
}

// errStale is the answer of State.advance when the record changed since it
// was read: another request for the same origin advanced it first.
var errStale = errors.New("witness: the log's record changed since it was read")

// State is the witness's durable state: a small SQLite file of its own
// (not the service's store), one row per log. Writes are compare-and-set
// on the size and root that were read, so that of two requests that read
// the same record only one advances it (tlog-witness: checking the old size
// and persisting "must be performed atomically"); they are committed in
// groups by one writer goroutine, each commit durable (WAL,
// synchronous=FULL) before any of its requests is answered.
type State struct {
	read   *sql.DB
	write  *sql.DB
	queue  chan *advance
	stop   chan struct{}
	closed sync.Once
	done   chan struct{}
}

// advance is one queued compare-and-set.
type advance struct {
	old, next Record
	result    chan error
}

// maxGroup bounds the writes one commit carries.
const maxGroup = 256

const schema = `
CREATE TABLE IF NOT EXISTS witness_logs (
	origin     TEXT PRIMARY KEY,
	-- tlog-witness's monitoring path: lowercase hex SHA-256 of the origin.
	origin_hash TEXT NOT NULL UNIQUE,
	tree_size  INTEGER NOT NULL CHECK (tree_size >= 0),
	root_hash  BLOB NOT NULL CHECK (length(root_hash) = 32),
	checkpoint TEXT NOT NULL
) STRICT;
-- The last line of defence against a rollback: whatever the code above does,
-- a record's size never decreases.
CREATE TRIGGER IF NOT EXISTS witness_logs_never_shrink
BEFORE UPDATE OF tree_size ON witness_logs
WHEN NEW.tree_size < OLD.tree_size
BEGIN SELECT RAISE(ABORT, 'witness: a log''s cosigned size never decreases'); END;
-- Checkpoints of the size last cosigned with another root, signed by the
-- log's key, refused (tlog-witness allows keeping them as evidence of a
-- misbehaving log), each beside the checkpoint this witness had cosigned
-- then: the two notes prove a split view by themselves. Only the log's key
-- can make one, so no third party can fill the table; still at most
-- maxEvidencePerLog per log, the newest; one sent again is kept once.
CREATE TABLE IF NOT EXISTS witness_evidence (
	id          INTEGER PRIMARY KEY,
	origin      TEXT NOT NULL,
	received_at INTEGER NOT NULL, -- unix microseconds
	kind        TEXT NOT NULL,
	tree_size   INTEGER NOT NULL,
	submitted   TEXT NOT NULL, -- the refused checkpoint with the log's verified signatures
	cosigned    TEXT NOT NULL, -- the witness's record then: cosigned, with the log's signatures
	UNIQUE (origin, submitted)
) STRICT;
PRAGMA user_version = 2;
`

// maxEvidencePerLog bounds the refused checkpoints kept per log: only the
// log's key can make one, but a broken log could make many.
const maxEvidencePerLog = 100

// EvidenceSameSizeOtherRoot is the kind of evidence kept: a checkpoint of
// the size last cosigned with another root. A larger checkpoint whose proof
// does not verify is not kept: it proves nothing by itself (a client that
// sends a wrong proof looks the same, and anyone can send the log's public
// checkpoints with one), and keeping it would let anyone push real
// evidence out.
const EvidenceSameSizeOtherRoot = "same_size_other_root"

// Evidence is one refused checkpoint kept (witness_evidence).
type Evidence struct {
	Origin     string    `json:"origin"`
	ReceivedAt time.Time `json:"received_at"`
	Kind       string    `json:"kind"`
	TreeSize   uint64    `json:"tree_size"`
	Submitted  string    `json:"submitted"`
	Cosigned   string    `json:"cosigned"`
}

// keepEvidence stores e durably (the state's synchronous=FULL), once per
// submitted checkpoint, and drops the log's oldest beyond maxEvidencePerLog.
func (s *State) keepEvidence(ctx context.Context, e Evidence) error {
	if e.TreeSize > math.MaxInt64 {
		return fmt.Errorf("witness state: tree size %d does not fit", e.TreeSize)
	}
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO witness_evidence (origin, received_at, kind, tree_size, submitted, cosigned)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (origin, submitted) DO NOTHING`,
		e.Origin, e.ReceivedAt.UnixMicro(), e.Kind, int64(e.TreeSize), e.Submitted, e.Cosigned); err != nil {
		return fmt.Errorf("witness state: keep evidence for %q: %w", e.Origin, err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM witness_evidence WHERE origin = ?1 AND id NOT IN
		(SELECT id FROM witness_evidence WHERE origin = ?1 ORDER BY id DESC LIMIT ?2)`, e.Origin, maxEvidencePerLog); err != nil {
		return fmt.Errorf("witness state: keep evidence for %q: %w", e.Origin, err)
	}
	return tx.Commit()
}

// ReadEvidence reads the refused checkpoints kept in the witness database
// at path, oldest first, opening it read-only (a serving witness may hold
// it).
func ReadEvidence(ctx context.Context, path string) ([]Evidence, error) {
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?mode=ro&_pragma=busy_timeout(10000)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	// The tables, not user_version (an older witness reopening the file
	// sets that back): a file without witness_logs is not a witness's
	// state; one without witness_evidence was never opened by a witness
	// that keeps evidence.
	var logs, evidence int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FILTER (WHERE name = 'witness_logs'), count(*) FILTER (WHERE name = 'witness_evidence')
		FROM sqlite_master WHERE type = 'table'`).Scan(&logs, &evidence); err != nil {
		return nil, fmt.Errorf("witness state %s: %w", path, err)
	}
	if logs == 0 {
		return nil, fmt.Errorf("%s is not a witness's state (no witness_logs table)", path)
	}
	if evidence == 0 {
		return nil, nil
	}
	rows, err := db.QueryContext(ctx, `SELECT origin, received_at, kind, tree_size, submitted, cosigned FROM witness_evidence ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("witness state %s: %w", path, err)
	}
	defer rows.Close()
	var out []Evidence
	for rows.Next() {
		var e Evidence
		var at, size int64
		if err := rows.Scan(&e.Origin, &at, &e.Kind, &size, &e.Submitted, &e.Cosigned); err != nil {
			return nil, err
		}
		e.ReceivedAt, e.TreeSize = time.UnixMicro(at).UTC(), uint64(size)
		out = append(out, e)
	}
	return out, rows.Err()
}

// OpenState opens (creating it if needed) the witness database at path.
func OpenState(ctx context.Context, path string) (*State, error) {
	// WAL with synchronous=FULL: a cosignature is answered only after its
	// record survives a power loss, so a restarted witness never cosigns
	// below what it already answered.
	pragmas := "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)"
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + pragmas
	write, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	write.SetMaxOpenConns(1)
	if _, err := write.ExecContext(ctx, schema); err != nil {
		write.Close()
		return nil, fmt.Errorf("witness state %s: %w", path, err)
	}
	read, err := sql.Open("sqlite", dsn+"&_pragma=query_only(1)")
	if err != nil {
		write.Close()
		return nil, err
	}
	s := &State{read: read, write: write, queue: make(chan *advance, maxGroup),
		stop: make(chan struct{}), done: make(chan struct{})}
	go s.writer()
	return s, nil
}

// Close stops the writer (after the queued writes) and closes the database.
func (s *State) Close() error {
	s.closed.Do(func() { close(s.stop) })
	<-s.done
	return errors.Join(s.read.Close(), s.write.Close())
}

// Get returns the record of origin; a log never cosigned has size 0 and
// the empty tree's root.
func (s *State) Get(ctx context.Context, origin string) (Record, error) {
	return s.get(ctx, origin, `SELECT origin, tree_size, root_hash, checkpoint FROM witness_logs WHERE origin = ?`, origin)
}

// GetByHash returns the record of the origin whose OriginHash is hash.
func (s *State) GetByHash(ctx context.Context, hash string) (Record, error) {
	return s.get(ctx, "", `SELECT origin, tree_size, root_hash, checkpoint FROM witness_logs WHERE origin_hash = ?`, hash)
}

func (s *State) get(ctx context.Context, origin, query string, arg any) (Record, error) {
	r := Record{Origin: origin, Root: verify.EmptyRoot}
	var size int64
	var root []byte
	err := s.read.QueryRowContext(ctx, query, arg).Scan(&r.Origin, &size, &root, &r.Checkpoint)
	if errors.Is(err, sql.ErrNoRows) {
		return r, nil
	}
	if err != nil {
		return Record{}, err
	}
	if len(root) != len(r.Root) || size < 0 {
		return Record{}, fmt.Errorf("witness state: the record of %q is corrupt", r.Origin)
	}
	r.Size, r.found = uint64(size), true
	copy(r.Root[:], root)
	return r, nil
}

// OriginHash is the lowercase hex SHA-256 of origin, which names a log in
// tlog-witness's monitoring path "/<origin hash>/checkpoint".
func OriginHash(origin string) string {
	h := sha256.Sum256([]byte(origin))
	return hex.EncodeToString(h[:])
}

// advance replaces old (as Get returned it) with next, durably, or answers
// errStale when the record is no longer old.
func (s *State) advance(ctx context.Context, old, next Record) error {
	if next.Size > math.MaxInt64 {
		return fmt.Errorf("witness state: tree size %d does not fit", next.Size)
	}
	a := &advance{old: old, next: next, result: make(chan error, 1)}
	select {
	case s.queue <- a:
	case <-s.stop:
		return errors.New("witness state: closed")
	case <-ctx.Done():
		return ctx.Err()
	}
	// Once queued the write is committed or not whatever the caller does:
	// wait for the answer, so that a cancelled request is never cosigned
	// silently and an answered one is always durable.
	select {
	case err := <-a.result:
		return err
	case <-s.done:
		select {
		case err := <-a.result:
			return err
		default:
			return errors.New("witness state: closed")
		}
	}
}

// writer commits the queued writes, as many as are waiting (up to
// maxGroup) in one transaction.
func (s *State) writer() {
	defer close(s.done)
	group := make([]*advance, 0, maxGroup)
	for {
		select {
		case a := <-s.queue:
			group = append(group[:0], a)
		case <-s.stop:
			for {
				select {
				case a := <-s.queue:
					s.commit([]*advance{a})
				default:
					return
				}
			}
		}
	more:
		for len(group) < maxGroup {
			select {
			case a := <-s.queue:
				group = append(group, a)
			default:
				break more
			}
		}
		s.commit(group)
	}
}

func (s *State) commit(group []*advance) {
	ctx := context.Background()
	results := make([]error, len(group))
	err := func() error {
		tx, err := s.write.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		for i, a := range group {
			results[i] = casRecord(ctx, tx, a.old, a.next)
		}
		return tx.Commit()
	}()
	for i, a := range group {
		if err != nil {
			a.result <- fmt.Errorf("witness state: commit: %w", err)
			continue
		}
		a.result <- results[i]
	}
}

// casRecord writes next if the row is still old: inserted when old was
// never cosigned, else updated where size and root are old's.
func casRecord(ctx context.Context, tx *sql.Tx, old, next Record) error {
	var res sql.Result
	var err error
	if !old.found {
		res, err = tx.ExecContext(ctx, `INSERT INTO witness_logs (origin, origin_hash, tree_size, root_hash, checkpoint)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT (origin) DO NOTHING`,
			next.Origin, OriginHash(next.Origin), int64(next.Size), next.Root[:], string(next.Checkpoint))
	} else {
		res, err = tx.ExecContext(ctx, `UPDATE witness_logs SET tree_size = ?, root_hash = ?, checkpoint = ?
			WHERE origin = ? AND tree_size = ? AND root_hash = ?`,
			int64(next.Size), next.Root[:], string(next.Checkpoint), next.Origin, int64(old.Size), old.Root[:])
	}
	if err != nil {
		return fmt.Errorf("witness state: write %q: %w", next.Origin, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n != 1 {
		return errStale
	}
	return nil
}
