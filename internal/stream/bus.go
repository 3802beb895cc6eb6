package stream

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Channel is the PostgreSQL notification channel of the live stream.
const Channel = "auditchain_events"

// maxPayload is PostgreSQL's limit: a NOTIFY payload must be shorter than
// 8000 bytes in the default configuration.
const maxPayload = 7999

// notification is the NOTIFY payload. Resync replaces Frame when the frame
// does not fit: the account's listeners are cut off as lagged and re-read,
// rather than miss an event silently.
type notification struct {
	UserID string `json:"user_id"`
	Frame  *Frame `json:"frame,omitempty"`
	// Leaf is Frame.Leaf, which the frame's own JSON (what clients see)
	// leaves out.
	Leaf   *int64 `json:"leaf,omitempty"`
	Resync bool   `json:"resync,omitempty"`
}

// PGBus carries frames between replicas sharing a PostgreSQL database. A
// writer sends a frame as a NOTIFY inside the append's own statement
// (Notification gives the channel and payload); Listen, on a dedicated
// connection, feeds every NOTIFY (this replica's own included) into the
// local Hub. So on PostgreSQL a replica publishes only through the bus, never
// to its Hub directly, or its own listeners would get each frame twice.
type PGBus struct {
	listenURL string
	hub       *Hub
	log       *slog.Logger

	ready     chan struct{}
	readyOnce sync.Once

	minBackoff, maxBackoff time.Duration

	// Vouch, when set before Listen, says whether this replica can vouch
	// that every event of the account up to now was announced; when it
	// cannot, a frame is not delivered and the account's subscriptions are
	// resynced instead, so no stream receives a frame after a gap. It must
	// be cheap: it runs for every notification.
	Vouch func(userID string) bool
}

// NewPGBus returns a bus listening on its own connection to listenURL (the
// database the writers notify). Run Listen to receive.
func NewPGBus(listenURL string, hub *Hub, log *slog.Logger) *PGBus {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &PGBus{listenURL: listenURL, hub: hub, log: log, ready: make(chan struct{}),
		minBackoff: 250 * time.Millisecond, maxBackoff: 15 * time.Second}
}

// Notification returns the channel and payload of f's NOTIFY, which the
// caller folds into a statement of its append's transaction as
// pg_notify(channel, payload): PostgreSQL delivers it only if and when that
// transaction commits, in commit order, so no committed event goes
// unannounced and none rolled back is announced.
func (b *PGBus) Notification(userID string, f Frame) (channel, payload string, err error) {
	payload, err = encodeNotification(userID, f)
	return Channel, payload, err
}

func encodeNotification(userID string, f Frame) (string, error) {
	b, _ := json.Marshal(notification{UserID: userID, Frame: &f, Leaf: &f.Leaf}) // strings and integers only
	if len(b) > maxPayload {
		b, _ = json.Marshal(notification{UserID: userID, Resync: true})
		if len(b) > maxPayload {
			return "", fmt.Errorf("stream: user id of %d bytes does not fit a notification", len(userID))
		}
	}
	return string(b), nil
}

// Ready is closed once the listener first holds LISTEN.
func (b *PGBus) Ready() <-chan struct{} { return b.ready }

// Listen receives notifications into the Hub until ctx ends, reconnecting with
// backoff when the connection drops. Every time LISTEN is (re)established, all
// local subscriptions are resynced: notifications sent while nobody listened
// are gone, so their clients must re-read.
func (b *PGBus) Listen(ctx context.Context) error {
	backoff := b.minBackoff
	for {
		err := b.listenOnce(ctx, func() {
			backoff = b.minBackoff
			b.hub.ResyncAll()
			b.readyOnce.Do(func() { close(b.ready) })
		})
		if ctx.Err() != nil {
			return nil
		}
		b.log.Warn("stream listener lost its connection; reconnecting", "err", err, "backoff", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		backoff = min(2*backoff, b.maxBackoff)
	}
}

// listenOnce holds one connection until it fails or ctx ends.
func (b *PGBus) listenOnce(ctx context.Context, listening func()) error {
	conn, err := pgx.Connect(ctx, b.listenURL)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+Channel); err != nil {
		return err
	}
	listening()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		b.deliver(n.Payload)
	}
}

func (b *PGBus) deliver(payload string) {
	var n notification
	if err := json.Unmarshal([]byte(payload), &n); err != nil || n.UserID == "" {
		b.log.Error("stream: malformed notification ignored", "err", err, "bytes", len(payload))
		return
	}
	switch {
	case n.Frame != nil && b.Vouch != nil && !b.Vouch(n.UserID):
		b.hub.Resync(n.UserID)
	case n.Frame != nil:
		// A notification without a leaf (a replica older than the field)
		// is judged by its sequence instead (UnknownLeaf).
		n.Frame.Leaf = UnknownLeaf
		if n.Leaf != nil {
			n.Frame.Leaf = *n.Leaf
		}
		b.hub.Publish(n.UserID, *n.Frame)
	case n.Resync:
		b.hub.Resync(n.UserID)
	}
}
