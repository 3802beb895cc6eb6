package store

// Once-only notices (table notice_once, migration 021;
// docs/decisions/notifications.md "Rows"): a notice with a dedup key is
// marked once per account and type, in the transaction of its rows.

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
)

// DedupKeysWritten reports which of keys userID's notices of typ carry,
// read through q (nil: the read pool).
func (s *Store) DedupKeysWritten(ctx context.Context, q Querier, userID, typ string, keys []string) (map[string]bool, error) {
	done := make(map[string]bool, len(keys))
	const chunk = 500
	for len(keys) > 0 {
		n := min(chunk, len(keys))
		list, args := s.inList([]any{userID, typ}, keys[:n])
		found, err := queryAll(ctx, s, q, func(r scanner) (string, error) {
			var k string
			return k, r.Scan(&k)
		}, `SELECT dedup_key FROM notice_once WHERE user_id = `+s.placeholder(1)+` AND type = `+s.placeholder(2)+
			` AND dedup_key IN (`+list+`)`, args...)
		if err != nil {
			return nil, err
		}
		for _, k := range found {
			done[k] = true
		}
		keys = keys[n:]
	}
	return done, nil
}

// markOnce marks the once-only notices among rows — each (user_id, type,
// DedupKey) once, in notice_once — and returns rows without those of the
// notices that were marked before. rows itself is not changed.
func (s *Store) markOnce(ctx context.Context, tx *sql.Tx, rows []Notification) ([]Notification, error) {
	type group struct{ userID, typ string }
	var order []group
	keys := make(map[group][]string)
	var last group
	for _, r := range rows {
		if r.DedupKey == nil {
			continue
		}
		if g := (group{r.UserID, r.Type}); g != last || len(order) == 0 {
			if _, ok := keys[g]; !ok {
				order = append(order, g)
			}
			last = g
		}
		keys[last] = append(keys[last], *r.DedupKey)
	}
	var fresh map[group]map[string]bool // of the groups with keys marked before
	for _, g := range order {
		// In key order, each once: a batch's marks go into the B-tree side
		// by side (a job's keys come in expiry order, scattered across it).
		ks := slices.Compact(slices.Sorted(slices.Values(keys[g])))
		var marked map[string]bool
		for chunk := range slices.Chunk(ks, 1000) {
			got, err := s.markKeys(ctx, tx, g.userID, g.typ, chunk)
			if err != nil {
				return nil, err
			}
			if got != nil && marked == nil {
				marked = make(map[string]bool, len(ks))
				for _, k := range ks {
					marked[k] = true // until a chunk says otherwise
				}
			}
			for k, isNew := range got {
				marked[k] = isNew
			}
		}
		if marked != nil {
			if fresh == nil {
				fresh = make(map[group]map[string]bool)
			}
			fresh[g] = marked
		}
	}
	if fresh == nil {
		return rows, nil
	}
	out := make([]Notification, 0, len(rows))
	for _, r := range rows {
		if f, some := fresh[group{r.UserID, r.Type}]; r.DedupKey == nil || !some || f[*r.DedupKey] {
			out = append(out, r)
		}
	}
	return out, nil
}

// markKeys marks userID's notices of typ with the (sorted, distinct) keys
// ks. It returns nil when every key was new, and otherwise which were (true)
// and which marked before (false).
//
// On PostgreSQL one statement returns the keys it inserted (a conflict with
// a concurrent transaction waits for it, then skips). On SQLite, where the
// one writer runs the transaction, the insert is counted instead of
// returning each key — in a savepoint, which is released when every key was
// new (a job's, read before it: the rule) and otherwise undone, to mark the
// keys not found.
func (s *Store) markKeys(ctx context.Context, tx *sql.Tx, userID, typ string, ks []string) (map[string]bool, error) {
	insert := func(suffix string) (string, []any) {
		var b strings.Builder
		b.WriteString(`INSERT INTO notice_once (user_id, type, dedup_key) VALUES `)
		args := make([]any, 0, 2+len(ks))
		args = append(args, userID, typ)
		for i, k := range ks {
			if i > 0 {
				b.WriteString(", ")
			}
			// $1 and $2 first in every tuple: on SQLite, where the key is
			// positional (?), they are its first two parameters.
			args = append(args, k)
			b.WriteString("($1, $2, " + s.placeholder(len(args)) + ")")
		}
		return b.String() + suffix, args
	}
	result := func(inserted []string) map[string]bool {
		if len(inserted) == len(ks) {
			return nil
		}
		out := make(map[string]bool, len(ks))
		for _, k := range ks {
			out[k] = false
		}
		for _, k := range inserted {
			out[k] = true
		}
		return out
	}
	if s.Dialect == Postgres {
		q, args := insert(` ON CONFLICT DO NOTHING RETURNING dedup_key`)
		inserted, err := queryAll(ctx, s, tx, func(r scanner) (string, error) {
			var k string
			return k, r.Scan(&k)
		}, q, args...)
		if err != nil {
			return nil, err
		}
		return result(inserted), nil
	}
	if _, err := tx.ExecContext(ctx, `SAVEPOINT once`); err != nil {
		return nil, err
	}
	q, args := insert(` ON CONFLICT DO NOTHING`)
	res, err := tx.ExecContext(ctx, q, args...)
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	if err == nil && n == int64(len(ks)) {
		_, err = tx.ExecContext(ctx, `RELEASE once`)
		return nil, err
	}
	if err != nil {
		// The insert's error first; the savepoint's, if undoing it failed too.
		_, undoErr := tx.ExecContext(ctx, `ROLLBACK TO once`)
		_, releaseErr := tx.ExecContext(ctx, `RELEASE once`)
		return nil, errors.Join(err, undoErr, releaseErr)
	}
	// Some were marked before: undo, find them, mark the others.
	if _, err := tx.ExecContext(ctx, `ROLLBACK TO once`); err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `RELEASE once`); err != nil {
		return nil, err
	}
	done, err := s.DedupKeysWritten(ctx, tx, userID, typ, ks)
	if err != nil {
		return nil, err
	}
	var todo []string
	for _, k := range ks {
		if !done[k] {
			todo = append(todo, k)
		}
	}
	if len(todo) > 0 {
		if _, err := s.markKeys(ctx, tx, userID, typ, todo); err != nil {
			return nil, err
		}
	}
	return result(todo), nil
}
