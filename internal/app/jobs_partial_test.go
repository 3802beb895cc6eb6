package app_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
)

// A grant-expiry run whose write fails part-way (CONTRACT.md "Operator
// jobs": nothing half-done, safe to run again) with several accounts in one
// transaction: the accounts written before the failure are whole, the failed
// transaction's accounts and those after it have no row at all, and the
// next run notifies exactly those, once.
func TestGrantExpiryFailingPartWayLeavesWholeAccountsAndResumes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		st := storetest.Open(t, dsn)
		a := apptest.New(t, st, apptest.Options{})
		app.SetExpiryNoticesPerWrite(a, 6) // two accounts of three grants per transaction
		ctx := context.Background()

		var users []string
		for i := range 4 {
			acct, _, err := a.CreateAccount(ctx, app.AccountRequest{Email: fmt.Sprintf("expiry%d@example.com", i)})
			if err != nil {
				t.Fatal(err)
			}
			p := app.Principal{UserID: acct.UserID, KeyID: "k", Kind: "api_key"}
			for g := range 3 {
				if _, err := a.CreateGrant(ctx, p, api.CreateGrantRequest{Subagent: new(fmt.Sprintf("worker-%d", g)), AllowedTools: []string{"search"},
					MaxToolCalls: new(int64(5)), ExpiresAt: new(domain.FormatTimestamp(a.Now().Add(2 * time.Hour)))}); err != nil {
					t.Fatal(err)
				}
			}
			users = append(users, acct.UserID)
		}
		slices.Sort(users) // the job visits accounts in user order

		// Refuse every notice row of the third account: the second transaction
		// (third and fourth accounts) fails.
		failing := users[2]
		create, drop := `CREATE TRIGGER refuse_notice BEFORE INSERT ON notifications FOR EACH ROW
			WHEN (NEW.user_id = '`+failing+`') BEGIN SELECT RAISE(ABORT, 'injected write failure'); END`, `DROP TRIGGER refuse_notice`
		if strings.HasPrefix(dsn, "postgres") {
			create = `CREATE FUNCTION refuse_notice() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN RAISE EXCEPTION 'injected write failure'; END $$;
				CREATE TRIGGER refuse_notice BEFORE INSERT ON notifications FOR EACH ROW
				WHEN (NEW.user_id = '` + failing + `') EXECUTE FUNCTION refuse_notice()`
			drop = `DROP TRIGGER refuse_notice ON notifications; DROP FUNCTION refuse_notice()`
		}
		if _, err := st.WriteDB().ExecContext(ctx, create); err != nil {
			t.Fatal(err)
		}
		rowsOf := func(user string) int {
			var n int
			if err := st.DB().QueryRowContext(ctx, `SELECT count(*) FROM notification_rows WHERE user_id = $1 AND type = $2`,
				user, domain.NoticeGrantExpiring24h).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}

		if res, err := a.GrantExpirySweep(ctx); err == nil || !strings.Contains(err.Error(), "injected write failure") {
			t.Fatalf("run with a failing write: %+v, %v; want the write's error", res, err)
		}
		// Transactions go in user order and the run stops at the failed one,
		// so the written accounts are a prefix, each whole. Which accounts
		// shared the failed transaction depends on how far the reader was
		// ahead (the writer takes what is ready, at most two accounts here);
		// the first account is never in it.
		channels := rowsOf(users[0]) / 3 // three grants an account; a row per channel each
		if channels < 1 {
			t.Fatalf("the first transaction's account has %d rows", rowsOf(users[0]))
		}
		written := 0
		for i, u := range users {
			switch got := rowsOf(u); {
			case got == 3*channels && written == i && u != failing:
				written++
			case got != 0:
				t.Errorf("after the failed run, account %d (of 4, in user order) has %d rows, want none (after the first unwritten)", i+1, got)
			}
		}
		unwritten := len(users) - written
		if written < 1 || written > 2 {
			t.Errorf("after the failed run %d accounts written; want 1 or 2 (those before the failing transaction)", written)
		}

		if _, err := st.WriteDB().ExecContext(ctx, drop); err != nil {
			t.Fatal(err)
		}
		if res, err := a.GrantExpirySweep(ctx); err != nil || res != (api.GrantExpiry{Expiring: 12, Notified: 3 * unwritten, Users: unwritten}) {
			t.Fatalf("run after the failure: %+v, %v; want the %d unwritten accounts' grants notified", res, err, unwritten)
		}
		if res, err := a.GrantExpirySweep(ctx); err != nil || res != (api.GrantExpiry{Expiring: 12}) {
			t.Fatalf("third run: %+v, %v; want nobody notified", res, err)
		}
		for i, u := range users {
			if got := rowsOf(u); got != 3*channels {
				t.Errorf("in the end account %d has %d rows, want %d (each notice once)", i+1, got, 3*channels)
			}
		}
	})
}
