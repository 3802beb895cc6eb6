package app

import (
	"context"
	"time"

	"github.com/auditchain/auditchain/internal/stream"
	"github.com/auditchain/auditchain/pkg/api"
)

// approvalWatch is a long-poll's subscription to its account's frames
// (GET /v1/approvals/{id}?wait=): the stream hub this replica's writes
// publish to, and across PostgreSQL replicas the bus feeds from NOTIFY
// (internal/stream). It holds no database connection.
type approvalWatch struct{ sub *stream.Subscription }

// watchApprovals subscribes to userID's frames when on. The subscription is
// counted under an identity of its own, not the caller's: a long-poll lasts
// at most api.MaxApprovalWait and is no event stream, so it takes none of
// the caller's stream slots.
//
// On PostgreSQL an append announces itself only while some replica marks
// its account as streamed (writer.WatchStream): the watch marks it, a short
// write at most once per refresh interval, before the caller reads.
func (a *App) watchApprovals(ctx context.Context, userID string, on bool) (approvalWatch, error) {
	if !on {
		return approvalWatch{}, nil
	}
	id, err := a.newID("approval-wait-", 8)
	if err != nil {
		return approvalWatch{}, err
	}
	sub, err := a.hub.Subscribe(userID, id)
	if err != nil {
		return approvalWatch{}, err
	}
	if err := a.w.WatchStream(ctx, userID, sub); err != nil {
		sub.Close()
		return approvalWatch{}, err
	}
	return approvalWatch{sub}, nil
}

func (w approvalWatch) close() {
	if w.sub != nil {
		w.sub.Close()
	}
}

// wait returns once the approval may have changed — an approval.* event of
// the account was announced, the subscription lagged (a frame may have been
// lost), or untilExpiry passed — reporting false, so the caller reads
// again; or once timeout fires or ctx ends, reporting true.
func (w approvalWatch) wait(ctx context.Context, timeout <-chan time.Time, untilExpiry time.Duration) (over bool) {
	expiry := time.NewTimer(max(untilExpiry, 0))
	defer expiry.Stop()
	for {
		select {
		case m, ok := <-w.sub.C():
			if !ok {
				return false
			}
			if t := m.Frame.EventType; t == api.EventApprovalGranted || t == api.EventApprovalDenied {
				return false
			}
		case <-expiry.C:
			return false
		case <-timeout:
			return true
		case <-ctx.Done():
			return true
		}
	}
}
