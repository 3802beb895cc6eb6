package writer

import (
	"context"

	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/stream"
)

// How an appended event reaches the stream listeners (docs/decisions/
// stream.md), which is the writer's business alone: with one process
// (SQLite, or PostgreSQL before StartBus) its frame is published to the hub
// after the commit, in commit order; across PostgreSQL replicas the append's
// own statement sends a NOTIFY, which PostgreSQL delivers to every replica's
// listener on commit, in commit order.

// FrameOf is the stream frame announcing e.
func FrameOf(e *store.Event) stream.Frame {
	return stream.Frame{StreamEvent: e.Stream(), Leaf: e.LeafIndex}
}

// notification fills the channel and payload of e's NOTIFY when the bus
// carries frames; it leaves them empty otherwise.
func (w *Writer) notification(e *store.Event, channel, payload *string) error {
	if w.bus == nil {
		return nil
	}
	var err error
	*channel, *payload, err = w.bus.Notification(e.UserID, FrameOf(e))
	return err
}

// publishAfterCommit publishes e's frame to this process's hub once the
// transaction committed.
func (t *Tx) publishAfterCommit(e *store.Event) {
	userID, f := e.UserID, FrameOf(e)
	t.AfterCommit(func() { t.w.hub.Publish(userID, f) })
}

// StartBus connects stream fan-out across replicas. On PostgreSQL every
// replica LISTENs on one channel, and appends NOTIFY inside their
// statements; on SQLite (one process) the hub is all there is. It returns
// once listening, and the listener runs until ctx ends.
func (w *Writer) StartBus(ctx context.Context, dsn string) error {
	if w.store.Dialect != store.Postgres {
		return nil
	}
	bus := stream.NewPGBus(dsn, w.hub, w.log)
	bus.Vouch = w.vouchAnnounced
	w.bus = bus
	go bus.Listen(ctx)
	go w.keepListenMarks(ctx)
	select {
	case <-bus.Ready():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
