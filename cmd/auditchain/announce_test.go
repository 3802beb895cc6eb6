package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

// `admin announce` mails the mandatory notice to every account with an
// email (through --mail), and records it as an email row of each.
func TestAdminAnnounce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		noEnv := func(string) string { return "" }
		admin := func(args ...string) (map[string]any, error) {
			var out bytes.Buffer
			err := run(context.Background(), append([]string{"admin"}, args...), noEnv, &out, io.Discard)
			var m map[string]any
			if err == nil {
				if jerr := json.Unmarshal(out.Bytes(), &m); jerr != nil {
					t.Fatalf("%v printed %q", args, out.String())
				}
			}
			return m, err
		}
		for _, email := range []string{"a@example.com", "b@example.com"} {
			if _, err := admin("create-account", "--db", dsn, "--create-db", "--email", email); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := admin("create-account", "--db", dsn, "--no-email"); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		bodyFile := filepath.Join(dir, "body.txt")
		if err := os.WriteFile(bodyFile, []byte("The v1 batch route changes on 2027-01-01.\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		outbox := filepath.Join(dir, "outbox")
		if err := os.Mkdir(outbox, 0o700); err != nil {
			t.Fatal(err)
		}
		if _, err := admin("announce", "--db", dsn, "--subject", "Batch route change", "--body-file", bodyFile, "--mail", "outbox:"+outbox,
			"--type", "grant.revoked"); err == nil {
			t.Fatal("announce of a type that is not mandatory succeeded")
		}
		res, err := admin("announce", "--db", dsn, "--subject", "Batch route change", "--body-file", bodyFile, "--mail", "outbox:"+outbox)
		if err != nil {
			t.Fatal(err)
		}
		if res["accounts_notified"] != float64(2) {
			t.Fatalf("announce: %v", res)
		}
		entries, _ := os.ReadDir(outbox)
		var announced []string
		for _, e := range entries {
			b, _ := os.ReadFile(filepath.Join(outbox, e.Name()))
			if strings.Contains(string(b), "Batch route change") && strings.Contains(string(b), "2027-01-01") {
				announced = append(announced, string(b))
			}
		}
		if len(announced) != 2 {
			t.Fatalf("%d announcement emails in the outbox, want 2", len(announced))
		}
		st, err := store.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		var rows, sent int
		if err := st.DB().QueryRow(`SELECT count(*), count(sent_at) FROM notification_rows WHERE type = 'breaking_change.announce' AND channel = 'email'`).Scan(&rows, &sent); err != nil {
			t.Fatal(err)
		}
		if rows != 2 || sent != 2 {
			t.Fatalf("breaking_change.announce email rows: %d, sent %d; want 2 and 2", rows, sent)
		}
	})
}
