package store

// Notification preferences (migration 016; CONTRACT.md "Notifications"):
// an account's changed (type, channel) rows; the rest are the defaults.

import (
	"context"
	"database/sql"
)

// Preference is one changed (type, channel) preference of an account.
type Preference struct {
	Type, Channel   string
	Enabled, Digest bool
}

// Preferences lists userID's changed preferences.
func (s *Store) Preferences(ctx context.Context, q Querier, userID string) ([]Preference, error) {
	return queryAll(ctx, s, q, func(r scanner) (Preference, error) {
		var p Preference
		err := r.Scan(&p.Type, &p.Channel, &p.Enabled, &p.Digest)
		return p, err
	}, `SELECT type, channel, enabled, digest FROM notification_preferences WHERE user_id = $1 ORDER BY type, channel`, userID)
}

// PutPreference stores one preference of userID.
func (s *Store) PutPreference(ctx context.Context, tx *sql.Tx, userID string, p Preference) error {
	s.forgetNotices(userID)
	_, err := tx.ExecContext(ctx, `INSERT INTO notification_preferences (user_id, type, channel, enabled, digest) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (user_id, type, channel) DO UPDATE SET enabled = excluded.enabled, digest = excluded.digest`,
		userID, p.Type, p.Channel, p.Enabled, p.Digest)
	return err
}
