package writer

import (
	"bytes"
	"context"
	"database/sql"
	"log/slog"
	"strings"
	"testing"

	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
)

// A failure of the writer's indexing behind the append is logged, once
// while it repeats (the idle loop retries it every tick), and the rows stay
// in the tail until a call succeeds.
func TestIndexBehindFailureIsLoggedOnce(t *testing.T) {
	ctx := context.Background()
	st := storetest.Open(t, storetest.DSN(t, storetest.SQLite))
	const good = "sha256:00000000000000000000000000000000000000000000000000000000000000aa"
	err := st.InTx(ctx, func(tx *sql.Tx) error {
		head, err := st.LockHead(ctx, tx, "u-index-log")
		if err != nil {
			return err
		}
		e := store.Event{StoredEvent: api.StoredEvent{Event: api.Event{UserID: "u-index-log", Sequence: 0, EventID: "evt-0",
			EventType: "tool_call", PayloadHash: good, TS: "2026-11-28T00:00:00Z", Surface: "rest"}}}
		_, err = st.AppendEvent(ctx, tx, store.Append{Event: &e, Expect: head})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// A row the indexer cannot take: its leaf hash cannot be computed.
	if _, err := st.WriteDB().ExecContext(ctx, `UPDATE events SET payload_hash = 'sha256:not-hex'`); err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	g := &groupCommitter{store: st, log: slog.New(slog.NewTextHandler(&logged, nil))}
	for range 3 {
		if g.indexBehind(ctx) {
			t.Fatal("indexed a row whose payload hash is not a hash")
		}
	}
	if n := strings.Count(logged.String(), "level=ERROR"); n != 1 || !strings.Contains(logged.String(), "rows_behind=1") {
		t.Fatalf("logged %d errors, want 1 naming the row behind:\n%s", n, logged.String())
	}
	if _, err := st.WriteDB().ExecContext(ctx, `UPDATE events SET payload_hash = $1`, good); err != nil {
		t.Fatal(err)
	}
	if !g.indexBehind(ctx) || st.EventsBehind() != 0 || g.indexFailure != "" {
		t.Fatalf("after the repair: %d rows behind, failure %q", st.EventsBehind(), g.indexFailure)
	}
}
