package app

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/auditchain/auditchain/internal/app/writer"
	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
)

// Principal is the authenticated caller of a request: an API key, or a
// signed-in session (CONTRACT.md "Credentials").
type Principal struct {
	UserID    string
	KeyID     string // the API key; empty for a session
	SessionID string // the session; empty for a key
	Kind      string // "api_key" or "session" (Actor.kind)
	Machine   string // the key's machine label; empty for a session
	Scopes    []domain.Scope
	IsAdmin   bool
}

// Principal kinds (CONTRACT.md "Credentials": Actor.kind).
const (
	KindAPIKey  = "api_key"
	KindSession = "session"
)

// Identity is the credential behind the caller: the API key id, or the
// session id (CONTRACT.md "Credentials": Actor.identity).
func (p Principal) Identity() string {
	if p.Kind == KindSession {
		return p.SessionID
	}
	return p.KeyID
}

// Unscoped reports whether the credential holds every capability.
func (p Principal) Unscoped() bool { return len(p.Scopes) == 0 }

// TokenPrefix starts every API key token, so leaked keys are recognisable by scanners.
const TokenPrefix = "ac_"

// newKey is a key as created: the token is shown once and never stored.
type newKey struct {
	row   store.APIKey
	token string
}

// created is the key as POST /v1/keys answers it (CONTRACT.md
// "Credentials"), the token shown this once.
func (k newKey) created() api.KeyCreated {
	return api.KeyCreated{Key: keyOf(k.row), APIKey: k.token}
}

// keyOf is a key's metadata as every listing shows it (a team's included);
// the token never appears.
func keyOf(k store.APIKey) api.Key {
	scopes := k.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	return api.Key{ID: k.ID, Prefix: k.Prefix, Machine: k.Machine, Label: k.Label, Scopes: scopes,
		CreatedAt: domain.FormatTimestamp(k.CreatedAt), ExpiresAt: formatOpt(k.ExpiresAt), RevokedAt: formatOpt(k.RevokedAt)}
}

// MaxKeyTextBytes caps a key's machine and label.
const MaxKeyTextBytes = 200

func (a *App) newKey(userID string, req api.CreateKeyRequest) (newKey, error) {
	var expires *time.Time
	if req.ExpiresAt != nil {
		t, err := domain.ParseTimestamp(*req.ExpiresAt)
		if err != nil {
			return newKey{}, domain.Validation(domain.FieldError{Field: "expires_at", Message: "must be an ISO-8601 timestamp with a UTC offset, like 2026-01-02T15:04:05+00:00"})
		}
		expires = &t
	}
	scopes, err := domain.ParseScopes(req.Scopes)
	if err != nil {
		return newKey{}, domain.Validation(domain.FieldError{Field: "scopes", Message: err.Error()})
	}
	now := a.now().UTC()
	if expires != nil && !expires.After(now) {
		return newKey{}, domain.Validation(domain.FieldError{Field: "expires_at", Message: "must be in the future"})
	}
	machine, label := deref(req.Machine), deref(req.Label)
	for _, f := range []struct{ name, v string }{{"machine", machine}, {"label", label}} {
		if len(f.v) > MaxKeyTextBytes {
			return newKey{}, domain.Validation(domain.FieldError{Field: f.name, Message: fmt.Sprintf("must be at most %d bytes", MaxKeyTextBytes)})
		}
	}
	secret := make([]byte, 32)
	if _, err := io.ReadFull(a.rand, secret); err != nil {
		return newKey{}, fmt.Errorf("key entropy: %w", err)
	}
	id, err := uuid.NewV7FromReader(a.rand)
	if err != nil {
		return newKey{}, fmt.Errorf("key id: %w", err)
	}
	token := TokenPrefix + base64.RawURLEncoding.EncodeToString(secret)
	names := make([]string, len(scopes))
	for i, s := range scopes {
		names[i] = string(s)
	}
	k := store.APIKey{
		ID: id.String(), UserID: userID, Hash: hashToken(token), Prefix: token[:len(TokenPrefix)+8],
		Machine: machine, Label: label, Scopes: names, CreatedAt: now,
	}
	if expires != nil {
		t := expires.UTC()
		k.ExpiresAt = &t
	}
	return newKey{row: k, token: token}, nil
}

func hashToken(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

// AccountRequest describes an account to create (admin create-account).
type AccountRequest struct {
	Email   string
	NoEmail bool
	Admin   bool
}

// CreateAccount stores an account with one unscoped key.
func (a *App) CreateAccount(ctx context.Context, req AccountRequest) (store.Account, api.KeyCreated, error) {
	var email *string
	if !req.NoEmail {
		e, ok := domain.NormalizeEmail(req.Email)
		if !ok {
			return store.Account{}, api.KeyCreated{}, domain.Validation(domain.FieldError{Field: "email", Message: "must be one plain address like name@example.com (or use --no-email)"})
		}
		email = &e
	}
	id, err := uuid.NewV7FromReader(a.rand)
	if err != nil {
		return store.Account{}, api.KeyCreated{}, err
	}
	acct := store.Account{UserID: id.String(), Email: email, IsAdmin: req.Admin, CreatedAt: a.now().UTC()}
	key, err := a.newKey(acct.UserID, api.CreateKeyRequest{})
	if err != nil {
		return store.Account{}, api.KeyCreated{}, err
	}
	err = a.w.Write(ctx, func(t *writer.Tx) error {
		if err := a.store.CreateAccountWithKey(ctx, t.SQL(), acct, key.row); err != nil {
			return err
		}
		return a.keyCreated(ctx, t, key.row)
	})
	switch {
	case errors.Is(err, store.ErrConflict):
		return store.Account{}, api.KeyCreated{}, domain.Errorf(domain.CodeAccountExists, "an account with that email already exists")
	case err != nil:
		return store.Account{}, api.KeyCreated{}, err
	}
	return acct, key.created(), nil
}

// CodeTooManyKeys answers a key over --max-keys-per-account (429).
const CodeTooManyKeys = "too_many_keys"

// CreateKey stores a new key for userID, unless the account already holds
// --max-keys-per-account live keys (429 too_many_keys: revoke one first).
func (a *App) CreateKey(ctx context.Context, userID string, req api.CreateKeyRequest) (api.KeyCreated, error) {
	key, err := a.newKey(userID, req)
	if err != nil {
		return api.KeyCreated{}, err
	}
	err = a.w.Write(ctx, func(t *writer.Tx) error {
		// Under the account's lock, so that concurrent creations on any
		// replica count each other.
		if _, err := t.Lock(ctx, userID); err != nil {
			return err
		}
		n, err := a.store.LiveKeys(ctx, t.SQL(), userID, a.now())
		if err != nil {
			return err
		}
		if limit := cmp.Or(a.cfg.MaxKeys, config.DefaultMaxKeys); n >= limit {
			return domain.Errorf(CodeTooManyKeys, "the account holds %d live keys, its limit; revoke one first", n).
				With("limit", limit)
		}
		if err := a.store.CreateKey(ctx, t.SQL(), key.row); err != nil {
			return err
		}
		return a.keyCreated(ctx, t, key.row)
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return api.KeyCreated{}, domain.NotFound(domain.CodeAccountNotFound, "account")
	case err != nil:
		return api.KeyCreated{}, err
	}
	return key.created(), nil
}

// keyCreated writes the key.created notice of k (CONTRACT.md: a key is
// created, on any route) in the creating transaction.
func (a *App) keyCreated(ctx context.Context, t *writer.Tx, k store.APIKey) error {
	subject := map[string]any{"key_id": k.ID, "prefix": k.Prefix}
	if k.Label != "" {
		subject["label"] = k.Label
	}
	if k.Machine != "" {
		subject["machine"] = k.Machine
	}
	_, err := a.notify(ctx, t, k.UserID, Notice{Type: domain.NoticeKeyCreated, Subject: subject})
	return err
}

// Keys lists the caller's keys (metadata only, newest first).
func (a *App) Keys(ctx context.Context, p Principal) (api.KeyList, error) {
	keys, err := a.store.Keys(ctx, p.UserID)
	if err != nil {
		return api.KeyList{}, err
	}
	return api.KeyList{Count: len(keys), Keys: keysOf(keys)}, nil
}

// keysOf is keys as a listing shows them.
func keysOf(keys []store.APIKey) []api.Key {
	out := make([]api.Key, len(keys))
	for i, k := range keys {
		out[i] = keyOf(k)
	}
	return out
}

// RevokeKey revokes one of the caller's keys; another account's key id answers
// exactly like a missing one.
func (a *App) RevokeKey(ctx context.Context, p Principal, keyID string) (api.KeyRevoked, error) {
	if _, err := uuid.Parse(keyID); err != nil {
		return api.KeyRevoked{}, domain.NotFound(domain.CodeKeyNotFound, "key")
	}
	var k store.APIKey
	err := a.w.Write(ctx, func(t *writer.Tx) error {
		writer.Invalidate(t, a.keyCache, keyCacheScope)
		var err error
		k, err = a.store.RevokeKey(ctx, t.SQL(), p.UserID, keyID, a.now())
		return err
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return api.KeyRevoked{}, domain.NotFound(domain.CodeKeyNotFound, "key")
	case err != nil:
		return api.KeyRevoked{}, err
	}
	return api.KeyRevoked{Key: keyOf(k)}, nil
}

var (
	errMissingToken = &domain.Error{Code: domain.CodeMissingToken, Detail: "send an API key in the X-API-Key header"}
	errInvalidKey   = &domain.Error{Code: domain.CodeInvalidAPIKey, Detail: "the API key is unknown, revoked or expired"}
)

// Authenticate resolves an X-API-Key token. Unknown, revoked and expired keys
// give the same answer, so the response reveals nothing about which it was.
func (a *App) Authenticate(ctx context.Context, token string) (Principal, error) {
	if token == "" {
		return Principal{}, errMissingToken
	}
	if !strings.HasPrefix(token, TokenPrefix) || len(token) > 128 {
		return Principal{}, errInvalidKey
	}
	h := hashToken(token)
	k, admin, err := a.keyByHash(ctx, h)
	if errors.Is(err, store.ErrNotFound) {
		return Principal{}, errInvalidKey
	}
	if err != nil {
		return Principal{}, err
	}
	if subtle.ConstantTimeCompare(k.Hash, h) != 1 {
		return Principal{}, errInvalidKey
	}
	now := a.now()
	if k.RevokedAt != nil || (k.ExpiresAt != nil && !now.Before(*k.ExpiresAt)) {
		return Principal{}, errInvalidKey
	}
	scopes := make([]domain.Scope, len(k.Scopes))
	for i, s := range k.Scopes {
		scopes[i] = domain.Scope(s)
	}
	return Principal{UserID: k.UserID, KeyID: k.ID, Kind: KindAPIKey, Machine: k.Machine, Scopes: scopes, IsAdmin: admin}, nil
}

// keyCacheScope is the one scope of a.keyCache: key writes are rare, so a
// revocation simply drops every cached key.
const keyCacheScope = ""

// knownKey is a cached API key row. Revocation and expiry are checked on every
// request against the row, so a cached key expires on time.
type knownKey struct {
	key   store.APIKey
	admin bool
}

// keyByHash reads the key with hash h, from a.keyCache when it holds it. Unknown
// keys are not cached: a key created later (by another command on the same
// database, say) must work at once.
func (a *App) keyByHash(ctx context.Context, h []byte) (store.APIKey, bool, error) {
	cached, ticket, ok := a.keyCache.Get(keyCacheScope, string(h))
	if ok {
		return cached.key, cached.admin, nil
	}
	k, admin, err := a.store.KeyByHash(ctx, h)
	if err == nil {
		a.keyCache.Put(keyCacheScope, ticket, string(h), knownKey{key: k, admin: admin})
	}
	return k, admin, err
}
