package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
)

// A row stores the payload its email or push would carry only when it may
// ever be sent: the failed email row of an account without email (it can be
// redelivered) does; the in_app row (sent as written) and the pending
// webhook row (no endpoint; it stays pending) do not.
func TestNoticeRowsStoreThePayloadOnlyWhereTheyMayBeSent(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		st := storetest.Open(t, dsn)
		a := apptest.New(t, st, apptest.Options{})
		ctx := context.Background()
		acct, _, err := a.CreateAccount(ctx, app.AccountRequest{NoEmail: true})
		if err != nil {
			t.Fatal(err)
		}
		p := app.Principal{UserID: acct.UserID, KeyID: "k", Kind: "api_key"}
		g, err := a.CreateGrant(ctx, p, api.CreateGrantRequest{Subagent: new("collector"), AllowedTools: []string{"search"}, MaxToolCalls: new(int64(5)),
			ExpiresAt: new(domain.FormatTimestamp(a.Now().Add(time.Hour)))})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.RevokeGrant(ctx, p, g.Grant.GrantID, api.RevokeRequest{Subagent: new("collector")}); err != nil {
			t.Fatal(err)
		}
		rows, err := st.Notifications(ctx, acct.UserID, nil, nil, 50)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]struct {
			status  string
			payload bool
		}{
			domain.ChannelInApp:   {domain.DeliverySent, false},
			domain.ChannelEmail:   {domain.DeliveryFailed, true},
			domain.ChannelWebhook: {domain.DeliveryPending, false},
		}
		seen := 0
		for _, r := range rows {
			if r.Type != domain.NoticeGrantRevoked {
				continue
			}
			seen++
			// The list never carries payloads: read what the row stores.
			if r, err = st.NotificationByID(ctx, nil, acct.UserID, r.ID); err != nil {
				t.Fatal(err)
			}
			w, ok := want[r.Channel]
			if !ok || r.DeliveryStatus != w.status || (r.Payload != "") != w.payload {
				t.Errorf("%s row: %s with payload %q; want %s, payload stored %v", r.Channel, r.DeliveryStatus, r.Payload, w.status, w.payload)
			}
		}
		if seen != len(want) {
			t.Errorf("%d grant.revoked rows, want %d", seen, len(want))
		}
	})
}
