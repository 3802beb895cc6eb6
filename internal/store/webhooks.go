package store

// Webhook endpoints and their delivery attempts (migration 016; CONTRACT.md
// "Webhooks").

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// Webhook is one registered endpoint.
type Webhook struct {
	ID        string
	UserID    string
	URL       string
	Types     []string
	Secret    string // listed only to the drain, never to the API
	CreatedAt time.Time
}

// Delivery is one attempt to deliver a row to an endpoint.
type Delivery struct {
	ID             int64
	WebhookID      string
	NotificationID string
	Attempt        int
	StatusCode     *int
	Error          *string
	Duration       time.Duration
	CreatedAt      time.Time
}

// CreateWebhook stores w and its types in tx.
func (s *Store) CreateWebhook(ctx context.Context, tx *sql.Tx, w Webhook) error {
	s.forgetNotices(w.UserID)
	if _, err := tx.ExecContext(ctx, `INSERT INTO webhooks (id, user_id, url, secret, created_at) VALUES ($1, $2, $3, $4, $5)`,
		w.ID, w.UserID, w.URL, w.Secret, w.CreatedAt.UnixMicro()); err != nil {
		return err
	}
	for _, t := range w.Types {
		if _, err := tx.ExecContext(ctx, `INSERT INTO webhook_types (webhook_id, user_id, type) VALUES ($1, $2, $3)`, w.ID, w.UserID, t); err != nil {
			return err
		}
	}
	return nil
}

// Webhooks lists userID's endpoints, oldest first, with their types and
// secrets; subscribedTo, when not empty, keeps those taking that type.
func (s *Store) Webhooks(ctx context.Context, q Querier, userID, subscribedTo string) ([]Webhook, error) {
	type row struct {
		w   Webhook
		typ string
	}
	query := `SELECT w.id, w.user_id, w.url, w.secret, w.created_at, t.type FROM webhooks w
		JOIN webhook_types t ON t.webhook_id = w.id WHERE w.user_id = $1`
	args := []any{userID}
	if subscribedTo != "" {
		query += ` AND w.id IN (SELECT webhook_id FROM webhook_types WHERE user_id = $1 AND type = $2)`
		args = append(args, subscribedTo)
	}
	rows, err := queryAll(ctx, s, q, func(r scanner) (row, error) {
		var x row
		var created int64
		err := r.Scan(&x.w.ID, &x.w.UserID, &x.w.URL, &x.w.Secret, &created, &x.typ)
		x.w.CreatedAt = time.UnixMicro(created).UTC()
		return x, err
	}, query+` ORDER BY w.created_at, w.id, t.type`, args...)
	if err != nil {
		return nil, err
	}
	var out []Webhook
	for _, x := range rows {
		if n := len(out); n > 0 && out[n-1].ID == x.w.ID {
			out[n-1].Types = append(out[n-1].Types, x.typ)
			continue
		}
		x.w.Types = []string{x.typ}
		out = append(out, x.w)
	}
	return out, nil
}

// CountWebhooks counts userID's endpoints.
func (s *Store) CountWebhooks(ctx context.Context, q Querier, userID string) (int, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM webhooks WHERE user_id = $1`, userID).Scan(&n)
	return n, err
}

// DeleteWebhook deletes userID's endpoint id with its types and attempts;
// ErrNotFound when userID has no such endpoint.
func (s *Store) DeleteWebhook(ctx context.Context, tx *sql.Tx, userID, id string) error {
	s.forgetNotices(userID)
	res, err := tx.ExecContext(ctx, `DELETE FROM webhooks WHERE user_id = $1 AND id = $2`, userID, id)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return ErrNotFound
	}
	return nil
}

// WebhookExists reports whether userID has endpoint id.
func (s *Store) WebhookExists(ctx context.Context, userID, id string) (bool, error) {
	var one int
	err := s.read.QueryRowContext(ctx, `SELECT 1 FROM webhooks WHERE user_id = $1 AND id = $2`, userID, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// InsertDeliveries records attempts in tx. Attempts of an endpoint deleted
// meanwhile are dropped with it.
func (s *Store) InsertDeliveries(ctx context.Context, tx *sql.Tx, ds []Delivery) error {
	for _, d := range ds {
		_, err := tx.ExecContext(ctx, `INSERT INTO webhook_deliveries (webhook_id, notification_id, attempt, status_code, error, duration_us, created_at)
			SELECT $1, $2, $3, $4, $5, $6, $7 WHERE EXISTS (SELECT 1 FROM webhooks WHERE id = $1)`,
			d.WebhookID, d.NotificationID, d.Attempt, d.StatusCode, d.Error, d.Duration.Microseconds(), d.CreatedAt.UnixMicro())
		if err != nil {
			return err
		}
	}
	return nil
}

// Deliveries lists endpoint id's attempts, newest first, at most limit.
func (s *Store) Deliveries(ctx context.Context, webhookID string, limit int) ([]Delivery, error) {
	return queryAll(ctx, s, nil, func(r scanner) (Delivery, error) {
		var d Delivery
		var status sql.NullInt64
		var errText sql.NullString
		var dur, created int64
		err := r.Scan(&d.ID, &d.WebhookID, &d.NotificationID, &d.Attempt, &status, &errText, &dur, &created)
		if status.Valid {
			c := int(status.Int64)
			d.StatusCode = &c
		}
		if errText.Valid {
			d.Error = &errText.String
		}
		d.Duration, d.CreatedAt = time.Duration(dur)*time.Microsecond, time.UnixMicro(created).UTC()
		return d, err
	}, `SELECT id, webhook_id, notification_id, attempt, status_code, error, duration_us, created_at FROM webhook_deliveries
		WHERE webhook_id = $1 ORDER BY id DESC LIMIT $2`, webhookID, limit)
}
