package store

// Machines' event counts (machine_heads): each event's machine_sequence, and
// the machines an account lists.

import (
	"context"
	"database/sql"
	"maps"
	"slices"
	"strings"
)

// MachineSequences returns the number of events each machine already has on
// the account (its next machine_sequence); machines never seen count 0. The
// caller holds the account's head, so the counts cannot move under it.
func (s *Store) MachineSequences(ctx context.Context, tx *sql.Tx, userID string, machineIDs []string) (map[string]int64, error) {
	out := make(map[string]int64, len(machineIDs))
	if s.Dialect == SQLite && slices.Contains(machineIDs, "") {
		n, err := s.eventsWithoutMachine(ctx, tx, userID)
		if err != nil {
			return nil, err
		}
		out[""] = n
		machineIDs = slices.DeleteFunc(slices.Clone(machineIDs), func(m string) bool { return m == "" })
	}
	if len(machineIDs) == 0 {
		return out, nil
	}
	query, args := s.inQuery(`SELECT machine_id, events FROM machine_heads WHERE user_id = `+s.placeholder(1)+` AND machine_id IN (`, userID, machineIDs)
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var m string
		var n int64
		if err := rows.Scan(&m, &n); err != nil {
			return nil, err
		}
		out[m] = n
	}
	return out, rows.Err()
}

// SetMachineSequences stores each machine's event count (what
// MachineSequences returned plus the events just stored), in one statement.
func (s *Store) SetMachineSequences(ctx context.Context, tx *sql.Tx, userID string, counts map[string]int64) error {
	if n, ok := counts[""]; ok && s.Dialect == SQLite {
		if err := s.setEventsWithoutMachine(ctx, tx, userID, n); err != nil {
			return err
		}
		counts = maps.Clone(counts)
		delete(counts, "")
	}
	if len(counts) == 0 {
		return nil
	}
	var b strings.Builder
	args := make([]any, 0, 3*len(counts))
	b.WriteString(`INSERT INTO machine_heads (user_id, machine_id, events) VALUES `)
	for _, m := range slices.Sorted(maps.Keys(counts)) {
		if len(args) > 0 {
			b.WriteByte(',')
		}
		n := len(args)
		b.WriteString("(" + s.placeholder(n+1) + ", " + s.placeholder(n+2) + ", " + s.placeholder(n+3) + ")")
		args = append(args, userID, m, counts[m])
	}
	b.WriteString(` ON CONFLICT (user_id, machine_id) DO UPDATE SET events = excluded.events`)
	_, err := tx.ExecContext(ctx, b.String(), args...)
	return err
}

// MachineSummary is one machine seen on the account.
type MachineSummary struct {
	MachineID string
	Events    int64
}

// Machines lists the machines that appended events.
func (s *Store) Machines(ctx context.Context, userID string) ([]MachineSummary, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT machine_id, events FROM machine_heads WHERE user_id = $1 AND machine_id <> '' ORDER BY machine_id`, userID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []MachineSummary
	for rows.Next() {
		var m MachineSummary
		if err := rows.Scan(&m.MachineID, &m.Events); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}
