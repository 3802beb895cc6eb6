package main

import (
	"bufio"
	"context"
	"io"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/auditchain/auditchain/internal/store/storetest"
)

// serveBanner starts serve, returns what it printed up to and including the
// "listening on" line, and stops it.
func serveBanner(t *testing.T, dsn string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--create-db", "--db", dsn}, noEnv, pw, io.Discard)
		pw.CloseWithError(io.EOF)
		done <- err
	}()
	var banner strings.Builder
	lines := bufio.NewScanner(pr)
	for lines.Scan() {
		banner.WriteString(lines.Text() + "\n")
		if strings.HasPrefix(lines.Text(), "auditchain listening on ") {
			break
		}
	}
	go io.Copy(io.Discard, pr)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v\n%s", err, banner.String())
	}
	return banner.String()
}

// serve on a store without accounts says how to make the first one (with the
// store's own --db), and creates none itself; once an account exists it says
// nothing of it.
func TestServeOnAnEmptyStoreTellsHowToCreateTheFirstAccount(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ac.db")
	dsn := "sqlite:" + path
	hint := "auditchain admin create-account --db sqlite:" + path + " --email you@example.com"
	if banner := serveBanner(t, dsn); !strings.Contains(banner, "has no account yet") || !strings.Contains(banner, hint) {
		t.Fatalf("serve on an empty store printed:\n%s\nwant the hint %q", banner, hint)
	}
	// The hint is the only thing that happened: still no account.
	if banner := serveBanner(t, dsn); !strings.Contains(banner, hint) {
		t.Fatalf("second start on the still empty store printed:\n%s", banner)
	}
	if err := run(context.Background(), strings.Fields("admin create-account --no-email --db "+dsn), noEnv, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	if banner := serveBanner(t, dsn); strings.Contains(banner, "no account") {
		t.Fatalf("serve with an account still printed the hint:\n%s", banner)
	}
}

// On PostgreSQL the hint names serve's --db as "$AUDITCHAIN_DB", which the
// shell the README sets it in expands (the line can be pasted): the URL's
// credentials are never printed.
func TestServeOnAnEmptyPostgresStoreHintsWithoutCredentials(t *testing.T) {
	dsn := storetest.DSN(t, storetest.Postgres)
	hint := `auditchain admin create-account --db "$AUDITCHAIN_DB" --email you@example.com`
	banner := serveBanner(t, dsn)
	if !strings.Contains(banner, hint) {
		t.Fatalf("serve on an empty store printed:\n%s\nwant the hint %q", banner, hint)
	}
	if u, err := url.Parse(dsn); err == nil && u.User != nil && strings.Contains(banner, u.User.String()+"@") {
		t.Errorf("the banner names the URL's user:\n%s", banner)
	}
}
