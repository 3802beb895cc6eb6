package store

// Operator jobs (migration 017; CONTRACT.md "Operator jobs", "Usage"): the
// periods' leases, what the expiry jobs visit, the figures of the operator
// digest, and the usage counts.

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"time"
)

// AcquireJobRun records that replica runs job's period starting at
// started; false when another replica (or this one) already has the period.
// Rows older than a week are deleted on the way: job_runs stays bounded.
func (s *Store) AcquireJobRun(ctx context.Context, tx *sql.Tx, job string, period time.Time, replica string, started time.Time) (bool, error) {
	if _, err := tx.ExecContext(ctx, `DELETE FROM job_runs WHERE job = $1 AND period < $2`, job, period.Add(-7*24*time.Hour).UnixMicro()); err != nil {
		return false, err
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO job_runs (job, period, replica, started_at) VALUES ($1, $2, $3, $4) ON CONFLICT (job, period) DO NOTHING`,
		job, period.UnixMicro(), replica, started.UnixMicro())
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// FinishJobRun records how job's period went ("" error: success).
func (s *Store) FinishJobRun(ctx context.Context, tx *sql.Tx, job string, period, finished time.Time, errText string) error {
	var e *string
	if errText != "" {
		e = &errText
	}
	_, err := tx.ExecContext(ctx, `UPDATE job_runs SET finished_at = $3, error = $4 WHERE job = $1 AND period = $2`,
		job, period.UnixMicro(), finished.UnixMicro(), e)
	return err
}

// JobRun is one stored run of a job.
type JobRun struct {
	Job        string
	Period     time.Time
	Replica    string
	StartedAt  time.Time
	FinishedAt *time.Time
	Error      *string
}

// LastJobRuns returns each job's newest stored run.
func (s *Store) LastJobRuns(ctx context.Context) (map[string]JobRun, error) {
	runs, err := queryAll(ctx, s, nil, func(r scanner) (JobRun, error) {
		var j JobRun
		var period, started int64
		var finished sql.NullInt64
		var errText sql.NullString
		err := r.Scan(&j.Job, &period, &j.Replica, &started, &finished, &errText)
		j.Period, j.StartedAt = time.UnixMicro(period).UTC(), time.UnixMicro(started).UTC()
		if finished.Valid {
			t := time.UnixMicro(finished.Int64).UTC()
			j.FinishedAt = &t
		}
		if errText.Valid {
			j.Error = &errText.String
		}
		return j, err
	}, `SELECT job, period, replica, started_at, finished_at, error FROM job_runs r
		WHERE period = (SELECT MAX(period) FROM job_runs WHERE job = r.job)`)
	if err != nil {
		return nil, err
	}
	out := make(map[string]JobRun, len(runs))
	for _, r := range runs {
		out[r.Job] = r
	}
	return out, nil
}

// ExpiringGrant is a live grant whose expiry falls in a window.
type ExpiringGrant struct {
	UserID, GrantID, Subagent string
	ExpiresAt                 time.Time
}

// GrantsExpiringByAccount calls fn with each account's grants that are
// not revoked, still have budget, and expire in (from, to], account by
// account (by user_id, each account's by expiry, then grant id); it stops
// at fn's first error and returns it.
//
// The grants are read in the order of the expiry index and sorted here:
// the database would hold and sort them all before its first row as well,
// and on SQLite its sorter costs several times this sort, on the reading
// goroutine that shares the box's cores with the job's writer.
func (s *Store) GrantsExpiringByAccount(ctx context.Context, from, to time.Time, fn func(userID string, gs []ExpiringGrant) error) error {
	gs, err := queryAll(ctx, s, nil, func(r scanner) (ExpiringGrant, error) {
		var g ExpiringGrant
		var exp int64
		err := r.Scan(&g.UserID, &g.GrantID, &g.Subagent, &exp)
		g.ExpiresAt = time.UnixMicro(exp).UTC()
		return g, err
	}, `SELECT user_id, grant_id, subagent, expires_at FROM grants
		WHERE revoked_at IS NULL AND expires_at > $1 AND expires_at <= $2 AND uses < max_tool_calls`, from.UnixMicro(), to.UnixMicro())
	if err != nil {
		return err
	}
	slices.SortFunc(gs, func(a, b ExpiringGrant) int {
		return cmp.Or(strings.Compare(a.UserID, b.UserID), a.ExpiresAt.Compare(b.ExpiresAt), strings.Compare(a.GrantID, b.GrantID))
	})
	for len(gs) > 0 {
		n := 1
		for n < len(gs) && gs[n].UserID == gs[0].UserID {
			n++
		}
		if err := fn(gs[0].UserID, gs[:n:n]); err != nil {
			return err
		}
		gs = gs[n:]
	}
	return nil
}

// ExpiringKey is an unrevoked key whose expiry falls in a window.
type ExpiringKey struct {
	UserID, KeyID, Prefix, Label string
	ExpiresAt                    time.Time
}

// KeysExpiring lists the keys that are not revoked and expire in (from, to].
func (s *Store) KeysExpiring(ctx context.Context, from, to time.Time) ([]ExpiringKey, error) {
	return queryAll(ctx, s, nil, func(r scanner) (ExpiringKey, error) {
		var k ExpiringKey
		var exp int64
		err := r.Scan(&k.UserID, &k.KeyID, &k.Prefix, &k.Label, &exp)
		k.ExpiresAt = time.UnixMicro(exp).UTC()
		return k, err
	}, `SELECT user_id, id, prefix, label, expires_at FROM api_keys
		WHERE revoked_at IS NULL AND expires_at > $1 AND expires_at <= $2 ORDER BY expires_at, id`, from.UnixMicro(), to.UnixMicro())
}

// AccountsHoldingDigest lists the accounts with email rows held for the
// digest since since and not digested yet.
func (s *Store) AccountsHoldingDigest(ctx context.Context, since time.Time) ([]string, error) {
	return queryAll(ctx, s, nil, func(r scanner) (string, error) {
		var id string
		return id, r.Scan(&id)
	}, `SELECT DISTINCT user_id FROM notifications WHERE delivery_status = 'suppressed_digest' AND digested_at IS NULL AND created_at >= $1
		ORDER BY user_id`, since.UnixMicro())
}

// OperatorFigures are the operator digest's counts over a window.
type OperatorFigures struct {
	AccountsNew, AccountsTotal                 int64
	GrantsCreated, GrantsRevoked, KeysCreated  int64
	NotificationsTotal, WebhookQueuePendingNow int64
}

// OperatorFigures counts what happened in [since, until].
func (s *Store) OperatorFigures(ctx context.Context, since, until time.Time) (OperatorFigures, error) {
	var f OperatorFigures
	a, b := since.UnixMicro(), until.UnixMicro()
	err := s.read.QueryRowContext(ctx, `SELECT
		(SELECT COUNT(*) FROM accounts WHERE created_at >= $1 AND created_at <= $2),
		(SELECT COUNT(*) FROM accounts),
		(SELECT COUNT(*) FROM grants WHERE created_at >= $1 AND created_at <= $2),
		(SELECT COUNT(*) FROM grants WHERE revoked_at >= $1 AND revoked_at <= $2),
		(SELECT COUNT(*) FROM api_keys WHERE created_at >= $1 AND created_at <= $2),
		(SELECT COUNT(*) FROM notification_rows WHERE created_at >= $1 AND created_at <= $2),
		(SELECT COUNT(*) FROM notifications WHERE channel = 'webhook' AND delivery_status = 'queued')`, a, b).
		Scan(&f.AccountsNew, &f.AccountsTotal, &f.GrantsCreated, &f.GrantsRevoked, &f.KeysCreated, &f.NotificationsTotal, &f.WebhookQueuePendingNow)
	return f, err
}

// UsageCount is one counter of an account's day.
type UsageCount struct {
	UserID, Day, Kind, Name string
	Count                   int64
}

// AddUsage adds counts in tx, one statement per chunk.
func (s *Store) AddUsage(ctx context.Context, tx *sql.Tx, counts []UsageCount) error {
	const chunk = 200
	for len(counts) > 0 {
		n := min(chunk, len(counts))
		var b strings.Builder
		b.WriteString(`INSERT INTO usage_counts (user_id, day, kind, name, count) VALUES `)
		args := make([]any, 0, 5*n)
		for i, c := range counts[:n] {
			if i > 0 {
				b.WriteString(", ")
			}
			p := len(args)
			b.WriteString("(" + s.placeholder(p+1) + ", " + s.placeholder(p+2) + ", " + s.placeholder(p+3) + ", " + s.placeholder(p+4) + ", " + s.placeholder(p+5) + ")")
			args = append(args, c.UserID, c.Day, c.Kind, c.Name, c.Count)
		}
		b.WriteString(` ON CONFLICT (user_id, day, kind, name) DO UPDATE SET count = usage_counts.count + excluded.count`)
		if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
			return err
		}
		counts = counts[n:]
	}
	return nil
}

// Usage returns the counts of kind (all accounts when userID is empty) over
// the days [fromDay, toDay], summed by name.
func (s *Store) Usage(ctx context.Context, userID, kind, fromDay, toDay string) (map[string]int64, error) {
	q := `SELECT name, SUM(count) FROM usage_counts WHERE kind = $1 AND day >= $2 AND day <= $3`
	args := []any{kind, fromDay, toDay}
	if userID != "" {
		q += ` AND user_id = $4`
		args = append(args, userID)
	}
	type row struct {
		name string
		n    int64
	}
	rows, err := queryAll(ctx, s, nil, func(r scanner) (row, error) {
		var x row
		return x, r.Scan(&x.name, &x.n)
	}, q+` GROUP BY name`, args...)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.name] = r.n
	}
	return out, nil
}

// AccountFigures are the dashboard's counts of one account.
type AccountFigures struct {
	EventsTotal, TreeSize                    int64
	GrantsLive, GrantsExpired, GrantsRevoked int64
	Proposals, Notifications                 map[string]int64
}

// AccountFigures reads the dashboard's counts of userID at now.
func (s *Store) AccountFigures(ctx context.Context, userID string, now time.Time) (AccountFigures, error) {
	f := AccountFigures{Proposals: map[string]int64{}, Notifications: map[string]int64{}}
	n := now.UnixMicro()
	// The grants in one pass, not three: an account of 10,000 grants read
	// them three times for the usage route.
	err := s.read.QueryRowContext(ctx, `SELECT
		COALESCE((SELECT event_count FROM chain_heads WHERE user_id = $1), 0),
		COUNT(CASE WHEN revoked_at IS NULL AND expires_at > $2 AND uses < max_tool_calls THEN 1 END),
		COUNT(CASE WHEN revoked_at IS NULL AND expires_at <= $2 THEN 1 END),
		COUNT(revoked_at)
		FROM grants WHERE user_id = $1`, userID, n).
		Scan(&f.EventsTotal, &f.GrantsLive, &f.GrantsExpired, &f.GrantsRevoked)
	if err != nil {
		return f, err
	}
	f.TreeSize = f.EventsTotal
	for _, q := range []struct {
		sql string
		m   map[string]int64
	}{
		{`SELECT status, COUNT(*) FROM proposals WHERE user_id = $1 GROUP BY status`, f.Proposals},
		{`SELECT delivery_status, COUNT(*) FROM notification_rows WHERE user_id = $1 GROUP BY delivery_status`, f.Notifications},
	} {
		rows, err := s.read.QueryContext(ctx, q.sql, userID)
		if err != nil {
			return f, err
		}
		for rows.Next() {
			var k string
			var c int64
			if err := rows.Scan(&k, &c); err != nil {
				rows.Close()
				return f, err
			}
			q.m[k] = c
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return f, err
		}
	}
	return f, nil
}
