// Package httpapitest starts the real HTTP API over a real store for the
// tests of its clients (pkg/client, the CLI, the MCP server, the hooks): the
// one way those tests get a server.
package httpapitest

import (
	"context"
	"net/http/httptest"
	"testing"

	openapi "github.com/auditchain/auditchain/api"
	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/httpapi"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
)

// Server is a running API: URL is its base (http://127.0.0.1:port).
type Server struct {
	URL     string
	App     *app.App
	Handler *httpapi.Server
	HTTP    *httptest.Server
}

// Start serves the API over a fresh store at dsn (storetest.DSN) until the
// test ends.
func Start(tb testing.TB, dsn string, o apptest.Options) *Server {
	tb.Helper()
	st := storetest.Open(tb, dsn)
	a := apptest.New(tb, st, o)
	h := httpapi.NewServer(a, o.AppConfig(tb), o.Logger(), openapi.OpenAPIJSON())
	srv := httptest.NewServer(h)
	tb.Cleanup(srv.Close)
	return &Server{URL: srv.URL, App: a, Handler: h, HTTP: srv}
}

// Account creates an account holding email with one unscoped key and
// returns its user id and the key's token.
func (s *Server) Account(tb testing.TB, email string) (userID, token string) {
	tb.Helper()
	acct, key, err := s.App.CreateAccount(context.Background(), app.AccountRequest{Email: email})
	if err != nil {
		tb.Fatalf("create account: %v", err)
	}
	return acct.UserID, key.APIKey
}

// Key creates another key of userID.
func (s *Server) Key(tb testing.TB, userID string, req api.CreateKeyRequest) string {
	tb.Helper()
	k, err := s.App.CreateKey(context.Background(), userID, req)
	if err != nil {
		tb.Fatalf("create key: %v", err)
	}
	return k.APIKey
}
