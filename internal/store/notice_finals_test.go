package store_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

// finalNotice is the rows of one grant.revoked notice stamped from at, as
// the app decides them: the final ones first (sharing salt), then the
// others; statuses by channel, "" for a channel left out.
func finalNotice(at, salt int64, inApp, email, webhook string) []store.Notification {
	var finals, rest []store.Notification
	for _, c := range []struct{ channel, status string }{{"in_app", inApp}, {"email", email}, {"webhook", webhook}} {
		if c.status == "" {
			continue
		}
		r := store.Notification{UserID: "u1", Type: "grant.revoked", Channel: c.channel, Severity: "warning",
			DeliveryStatus: c.status, Payload: `{"subject":{"grant_id":"g"}}`}
		if store.IsFinal(c.channel, c.status) {
			r.Salt = salt
			finals = append(finals, r)
		} else {
			rest = append(rest, r)
		}
	}
	rows := append(finals, rest...)
	for i := range rows {
		rows[i].CreatedAt = at + int64(i)
		if rows[i].Salt != 0 {
			rows[i].ID = store.FinalRowID(rows[i].CreatedAt, salt)
		} else {
			rows[i].ID = "q-" + rows[i].Channel + "-" + time.UnixMicro(at).Format("150405.000000")
		}
		if rows[i].Channel == "in_app" {
			sent := rows[i].CreatedAt
			rows[i].SentAt = &sent
		}
	}
	return rows
}

// A notice's final rows go into notice_finals as one row and come back
// from every reader as the rows they are: listed newest first among the
// account's other rows, found by id, counted by status; the account's
// newest stamp counts them.
func TestFinalRowsReadAsRows(t *testing.T) {
	storetest.EachStore(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
		createNoticeAccount(t, s, nil, now)
		at := now.UnixMicro()
		var written []store.Notification
		for i, n := range [][]store.Notification{
			finalNotice(at, 11, "sent", "failed", "pending"),   // all final
			finalNotice(at+3, 12, "sent", "queued", "pending"), // the email row queued, after the two final
			finalNotice(at+6, 13, "", "failed", "queued"),      // in_app off; webhook queued
			finalNotice(at+8, 14, "", "suppressed_digest", ""), // none final
			finalNotice(at+9, 15, "", "", "pending"),           // only the webhook
		} {
			if err := s.InTx(ctx, func(tx *sql.Tx) error {
				stored, err := s.InsertNotifications(ctx, tx, n)
				if err == nil && stored != int64(len(n)) {
					err = errors.New("stored fewer rows than given")
				}
				return err
			}); err != nil {
				t.Fatalf("notice %d: %v", i, err)
			}
			written = append(written, n...)
		}
		if nc, err := s.NoticeContext(ctx, s.DB(), "u1", "grant.revoked", ""); err != nil || nc.LastCreatedAt != at+9 {
			t.Fatalf("newest stamp %d, %v; want %d", nc.LastCreatedAt, err, at+9)
		}

		all, err := s.Notifications(ctx, "u1", nil, nil, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != len(written) {
			t.Fatalf("listed %d rows, want %d", len(all), len(written))
		}
		for i, got := range all {
			want := written[len(written)-1-i]
			if got.ID != want.ID || got.CreatedAt != want.CreatedAt || got.Channel != want.Channel || got.DeliveryStatus != want.DeliveryStatus ||
				got.Type != want.Type || got.Severity != want.Severity || (got.SentAt == nil) != (want.SentAt == nil) ||
				(got.SentAt != nil && *got.SentAt != *want.SentAt) {
				t.Errorf("row %d = %+v, want %+v", i, got, want)
			}
			byID, err := s.NotificationByID(ctx, nil, "u1", want.ID)
			if err != nil || byID.ID != want.ID || byID.CreatedAt != want.CreatedAt || byID.Channel != want.Channel {
				t.Errorf("by id %s: %+v, %v", want.ID, byID, err)
			}
		}
		// Every page size, every cursor: nothing lost or repeated.
		for limit := 1; limit <= len(all); limit++ {
			var paged []store.Notification
			var before *int64
			for {
				page, err := s.Notifications(ctx, "u1", before, nil, limit)
				if err != nil {
					t.Fatal(err)
				}
				paged = append(paged, page...)
				if len(page) < limit {
					break
				}
				before = &page[len(page)-1].CreatedAt
			}
			if len(paged) != len(all) {
				t.Fatalf("limit %d: %d rows, want %d", limit, len(paged), len(all))
			}
			for i := range paged {
				if paged[i].ID != all[i].ID {
					t.Fatalf("limit %d: row %d is %s, want %s", limit, i, paged[i].ID, all[i].ID)
				}
			}
		}
		if _, err := s.NotificationByID(ctx, nil, "u2", written[0].ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("another account's final row: %v, want ErrNotFound", err)
		}
		if _, err := s.NotificationByID(ctx, nil, "u1", store.FinalRowID(written[0].CreatedAt, 99)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a final row's stamp with another salt: %v, want ErrNotFound", err)
		}
		if _, err := s.NotificationByID(ctx, nil, "u1", store.FinalRowID(at+10, 15)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a stamp past the notice's final rows: %v, want ErrNotFound", err)
		}

		counts, err := s.AccountFigures(ctx, "u1", now)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]int64{"sent": 2, "failed": 2, "pending": 3, "queued": 2, "suppressed_digest": 1}
		for status, n := range want {
			if counts.Notifications[status] != n {
				t.Errorf("%s rows counted %d, want %d (all: %v)", status, counts.Notifications[status], n, counts.Notifications)
			}
		}
	})
}

// The rows of a notice's final rows must come stamped in order, from the
// first: anything else is refused, nothing written.
func TestFinalRowsOutOfOrderRefused(t *testing.T) {
	storetest.EachStore(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
		createNoticeAccount(t, s, nil, now)
		rows := finalNotice(now.UnixMicro(), 7, "sent", "failed", "pending")
		rows[1], rows[2] = rows[2], rows[1]
		gap := finalNotice(now.UnixMicro(), 8, "sent", "", "pending")
		gap[1].CreatedAt++
		queuedWithSalt := finalNotice(now.UnixMicro(), 9, "", "queued", "")
		queuedWithSalt[0].Salt = 9
		for name, rs := range map[string][]store.Notification{"swapped": rows, "gap": gap, "queued with a salt": queuedWithSalt} {
			err := s.InTx(ctx, func(tx *sql.Tx) error {
				_, err := s.InsertNotifications(ctx, tx, rs)
				return err
			})
			if err == nil {
				t.Errorf("%s: stored", name)
			}
		}
		if all, err := s.Notifications(ctx, "u1", nil, nil, 10); err != nil || len(all) != 0 {
			t.Errorf("rows after refusals: %v, %v", all, err)
		}
	})
}

// InsertNoticeRowsIf writes a notice's final rows as notice_finals's row,
// and its others after them, stamped above the account's newest of either
// table, with the final rows' ids filled in; a guess that no longer holds
// writes neither.
func TestInsertNoticeRowsIfWithFinalRows(t *testing.T) {
	storetest.EachStore(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
		createNoticeAccount(t, s, nil, now)
		insert := func(g store.NoticeGuess, rows []store.Notification) bool {
			t.Helper()
			var ok bool
			if err := s.InTx(ctx, func(tx *sql.Tx) (err error) {
				ok, err = s.InsertNoticeRowsIf(ctx, tx, "u1", "grant.revoked", now.UnixMicro(), g, rows)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			return ok
		}
		// Offsets, as the app decides them: the final rows first.
		offsets := func(rows []store.Notification) []store.Notification {
			for i := range rows {
				rows[i].CreatedAt -= now.UnixMicro()
				rows[i].ID = ""
				if rows[i].Salt == 0 {
					rows[i].ID = "q" + rows[i].Channel
				}
				if rows[i].SentAt != nil {
					sent := rows[i].CreatedAt
					rows[i].SentAt = &sent
				}
			}
			return rows
		}
		guess := store.NoticeGuess{}
		first := offsets(finalNotice(now.UnixMicro(), 21, "sent", "failed", "pending"))
		if !insert(guess, first) {
			t.Fatal("a guess that holds wrote nothing")
		}
		if first[2].CreatedAt != now.UnixMicro()+2 || first[2].ID != store.FinalRowID(first[2].CreatedAt, 21) ||
			first[0].SentAt == nil || *first[0].SentAt != first[0].CreatedAt {
			t.Fatalf("rows after the insert: %+v", first)
		}
		if insert(store.NoticeGuess{HasEmail: true}, offsets(finalNotice(now.UnixMicro(), 22, "sent", "queued", "pending"))) {
			t.Fatal("a wrong guess wrote rows")
		}
		second := offsets(finalNotice(now.UnixMicro(), 23, "sent", "queued", "pending"))
		second[2].ID = "second-queued"
		if !insert(guess, second) {
			t.Fatal("a guess that holds wrote nothing")
		}
		// Above the newest final row (first's webhook row), the final rows
		// first, the queued email row last.
		if second[0].CreatedAt != first[2].CreatedAt+1 || second[1].Channel != "webhook" || second[1].CreatedAt != second[0].CreatedAt+1 ||
			second[2].Channel != "email" || second[2].CreatedAt != second[0].CreatedAt+2 {
			t.Fatalf("second notice's rows: %+v", second)
		}
		all, err := s.Notifications(ctx, "u1", nil, nil, 10)
		if err != nil || len(all) != 6 {
			t.Fatalf("listed %d rows, %v; want 6", len(all), err)
		}
		want := append(append([]store.Notification{}, first...), second...)
		for i, got := range all {
			if w := want[len(want)-1-i]; got.ID != w.ID || got.CreatedAt != w.CreatedAt || got.DeliveryStatus != w.DeliveryStatus {
				t.Errorf("row %d = %s %d %s, want %s %d %s", i, got.ID, got.CreatedAt, got.DeliveryStatus, w.ID, w.CreatedAt, w.DeliveryStatus)
			}
		}
	})
}

// Two redeliveries of one failed final row at once: the first moves it to
// notifications, queued; the second, which waited for it, finds it queued
// (not failed) and moves nothing.
func TestConcurrentRedeliveriesOfAFinalRow(t *testing.T) {
	storetest.EachStore(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
		createNoticeAccount(t, s, nil, now)
		rows := finalNotice(now.UnixMicro(), 31, "sent", "failed", "pending")
		if err := s.InTx(ctx, func(tx *sql.Tx) error {
			_, err := s.InsertNotifications(ctx, tx, rows)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		email := rows[1].ID
		first, err := s.WriteDB().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := s.Requeue(ctx, first, "u1", email); err != nil || n.DeliveryStatus != "failed" {
			t.Fatalf("first redelivery: %+v, %v", n, err)
		}
		second := make(chan store.Notification, 1)
		go func() {
			var n store.Notification
			err := s.InTx(ctx, func(tx *sql.Tx) (err error) {
				n, err = s.Requeue(ctx, tx, "u1", email)
				return err
			})
			if err != nil {
				t.Error(err)
			}
			second <- n
		}()
		if err := first.Commit(); err != nil {
			t.Fatal(err)
		}
		if n := <-second; n.ID != email || n.DeliveryStatus != "queued" {
			t.Errorf("second redelivery saw %+v, want the row queued", n)
		}
		all, err := s.Notifications(ctx, "u1", nil, nil, 10)
		if err != nil || len(all) != 3 {
			t.Fatalf("rows: %+v, %v", all, err)
		}
		for _, r := range all {
			if r.Channel == "email" && (r.ID != email || r.DeliveryStatus != "queued" || r.CreatedAt != rows[1].CreatedAt) {
				t.Errorf("email row %+v, want %s queued at %d", r, email, rows[1].CreatedAt)
			}
		}
	})
}
