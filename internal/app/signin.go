package app

// Sign-in (CONTRACT.md "Credentials"; docs/decisions/auth.md): one-time codes
// mailed to an email, verified into a session whose cookie is a credential
// on every credentialed route. Codes and session tokens are stored only as
// hashes, compared in constant time; a new account is created only when its
// code is verified, with the legal acceptances its request carried.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/auditchain/auditchain/internal/app/writer"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/mail"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
)

// Mailer sends the service's mail (internal/mail.Mailer).
type Mailer interface {
	Send(ctx context.Context, msg mail.Message) error
}

var errBadEmail = domain.Validation(domain.FieldError{Field: "email", Message: "must be one plain address like name@example.com"})

// RequestOTP mails a one-time code to email for a request from client (the
// caller's address as the HTTP layer names it; "" from within the service).
// An email without an account must carry acceptances of every required
// legal document at its current version (checked before anything is
// written). At most domain.OTPRequestsPerHour codes are sent to one email in
// any hour, and the request is also charged its client's and the
// deployment's budgets (otpBudgets); a request that could not be mailed is
// charged nothing. The code is stored only as a hash, and a new code
// supersedes the earlier ones.
func (a *App) RequestOTP(ctx context.Context, client string, req api.OTPRequest) (api.OTPSent, error) {
	acceptances := req.Acceptances
	email, ok := domain.NormalizeEmail(deref(req.Email))
	if !ok {
		return api.OTPSent{}, errBadEmail
	}
	var stored []byte
	switch _, err := a.store.AccountByEmail(ctx, nil, email); {
	case errors.Is(err, store.ErrNotFound):
		if err := a.checkNewAccountAcceptances(acceptances); err != nil {
			return api.OTPSent{}, err
		}
		if stored, err = json.Marshal(acceptances); err != nil {
			return api.OTPSent{}, err
		}
	case err != nil:
		return api.OTPSent{}, err
	}
	code, err := a.newOTP()
	if err != nil {
		return api.OTPSent{}, err
	}
	id, err := a.newID("otp-", 16)
	if err != nil {
		return api.OTPSent{}, err
	}
	now := a.now().UTC()
	c := store.OTPCode{ID: id, Email: email, CodeHash: otpHash(id, email, code), Acceptances: stored,
		CreatedAt: now, ExpiresAt: now.Add(domain.OTPLifetime)}
	budgets := a.otpBudgets(client)
	err = a.w.Write(ctx, func(t *writer.Tx) error {
		if err := a.store.LockEmail(ctx, t.SQL(), email); err != nil {
			return err
		}
		recent, err := a.store.OTPRequestsSince(ctx, t.SQL(), email, now.Add(-time.Hour))
		if err != nil {
			return err
		}
		if len(recent) >= domain.OTPRequestsPerHour {
			wait := recent[len(recent)-domain.OTPRequestsPerHour].Add(time.Hour).Sub(now)
			return throttled(domain.CodeOTPRateLimited, domain.ThrottlePerEmail,
				fmt.Sprintf("at most %d codes an hour are sent to one email", domain.OTPRequestsPerHour), int((wait+time.Second-1)/time.Second))
		}
		if err := a.charge(ctx, t, domain.CodeOTPRateLimited, budgets...); err != nil {
			return err
		}
		return a.store.InsertOTPCode(ctx, t.SQL(), c)
	})
	if err != nil {
		return api.OTPSent{}, err
	}
	msg := mail.Message{To: email, Kind: "sign_in_code", Subject: "Your auditchain sign-in code: " + code,
		Body: fmt.Sprintf("Your auditchain sign-in code is\n\n    %s\n\nIt works once, until %s (%d minutes). "+
			"If you did not ask to sign in, ignore this message: nobody can sign in without the code.\n",
			code, c.ExpiresAt.Format("15:04 UTC"), int(domain.OTPLifetime/time.Minute))}
	if err := a.mail.Send(ctx, msg); err != nil {
		a.log.Error("sign-in code not mailed", "err", err)
		// A request that could not be mailed is not charged: its code goes,
		// and with it its place in the email's hourly count, and its units
		// go back to the other budgets, so that a mail outage does not lock
		// anyone out once mail works again.
		ctx := context.WithoutCancel(ctx)
		if err := a.w.Write(ctx, func(t *writer.Tx) error {
			if err := a.store.DeleteOTPCode(ctx, t.SQL(), c.ID); err != nil {
				return err
			}
			return a.refund(ctx, t, budgets...)
		}); err != nil {
			return api.OTPSent{}, err
		}
		return api.OTPSent{}, &domain.Error{Code: domain.CodeMailUnavailable, RetryAfter: 30,
			Detail: "the sign-in code could not be mailed; try again shortly"}
	}
	return api.OTPSent{Status: "sent", ExpiresAt: domain.FormatTimestamp(c.ExpiresAt)}, nil
}

// checkNewAccountAcceptances requires, for an email without an account, an
// acceptance of every required document at its current version (CONTRACT.md
// "Credentials").
func (a *App) checkNewAccountAcceptances(acceptances []api.AcceptanceInput) error {
	given := map[string]api.AcceptanceInput{}
	for _, in := range acceptances {
		d, ok := a.legal.Get(in.DocumentID)
		if !ok || in.Version != d.Version || in.ContentHash != d.ContentHash {
			return attestationInvalid(in.DocumentID)
		}
		given[in.DocumentID] = in
	}
	var unmet []string
	for _, id := range a.legal.RequiredIDs() {
		if _, ok := given[id]; !ok {
			unmet = append(unmet, id)
		}
	}
	if len(unmet) > 0 {
		return (&domain.Error{Code: domain.CodeAcceptancesRequired,
			Detail: "an email without an account must accept every required document: " + strings.Join(unmet, ", ")}).
			With("unmet_document_ids", unmet)
	}
	return nil
}

func attestationInvalid(documentID string) error {
	return (&domain.Error{Code: domain.CodeLegalAttestationInvalid,
		Detail: "an acceptance must name a served document at its current version and content_hash; nothing was recorded"}).
		With("document_id", documentID)
}

// newOTP draws a code of domain.OTPDigits decimal digits, uniformly.
func (a *App) newOTP() (string, error) {
	n, err := rand.Int(a.rand, big.NewInt(100_000_000))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%0*d", domain.OTPDigits, n), nil
}

// otpHash is what is stored of a code: SHA-256 over the code's id, its email
// and the code (an id of its own per code: equal codes never hash alike).
func otpHash(id, email, code string) []byte {
	sum := sha256.Sum256([]byte(id + "\x00" + email + "\x00" + code))
	return sum[:]
}

// SignedIn is the answer of POST /v1/auth/otp/verify and the session it
// started: Token is the session's token, which only the cookie carries, and
// ExpiresAt the cookie's expiry.
type SignedIn struct {
	api.SignedIn
	Token     string
	ExpiresAt time.Time
}

var errInvalidCode = &domain.Error{Code: domain.CodeInvalidOrExpiredCode,
	Detail: "the code is wrong, used or expired; request a new one"}

// VerifyOTP checks code against email's live code and, when it matches,
// spends it and starts a session; for an email without an account, the
// account is created then, with the acceptances its request carried. A
// wrong code counts against its code (domain.OTPMaxAttempts burn it); any
// failure is the same 401 and writes no session.
func (a *App) VerifyOTP(ctx context.Context, req api.OTPVerify) (SignedIn, error) {
	code := deref(req.Code)
	email, ok := domain.NormalizeEmail(deref(req.Email))
	if !ok {
		return SignedIn{}, errInvalidCode
	}
	now := a.now().UTC()
	c, err := a.store.LiveOTPCode(ctx, nil, email, now, domain.OTPMaxAttempts)
	if errors.Is(err, store.ErrNotFound) {
		return SignedIn{}, errInvalidCode
	}
	if err != nil {
		return SignedIn{}, err
	}
	if subtle.ConstantTimeCompare(otpHash(c.ID, email, code), c.CodeHash) != 1 {
		if err := a.w.Write(ctx, func(t *writer.Tx) error {
			return a.store.FailOTPAttempt(ctx, t.SQL(), c.ID, domain.OTPMaxAttempts)
		}); err != nil {
			return SignedIn{}, err
		}
		return SignedIn{}, errInvalidCode
	}
	token, tokenHash, err := a.newSessionToken()
	if err != nil {
		return SignedIn{}, err
	}
	sessionID, err := uuid.NewV7FromReader(a.rand)
	if err != nil {
		return SignedIn{}, err
	}
	newUserID, err := uuid.NewV7FromReader(a.rand)
	if err != nil {
		return SignedIn{}, err
	}
	out := SignedIn{SignedIn: api.SignedIn{Email: email}, Token: token, ExpiresAt: now.Add(a.cfg.SessionTTL)}
	out.SessionExpiresAt = domain.FormatTimestamp(out.ExpiresAt)
	err = a.w.Write(ctx, func(t *writer.Tx) error {
		spent, err := a.store.SpendOTPCode(ctx, t.SQL(), c.ID, now, domain.OTPMaxAttempts)
		if err != nil {
			return err
		}
		if !spent { // another verification spent it, or burnt it, first
			return errInvalidCode
		}
		// An account keeps its email, so the one the code was read with
		// stands; without one, look again under the lock of the spend.
		out.UserID = c.UserID
		if out.UserID == "" {
			acct, err := a.store.AccountByEmail(ctx, t.SQL(), email)
			switch {
			case errors.Is(err, store.ErrNotFound):
				acct = store.Account{UserID: newUserID.String(), Email: &email, CreatedAt: now}
				if err := a.store.CreateAccount(ctx, t.SQL(), acct); err != nil {
					return err
				}
				if err := a.recordSignInAcceptances(ctx, t, acct, c.Acceptances, now); err != nil {
					return err
				}
			case err != nil:
				return err
			}
			out.UserID = acct.UserID
		}
		return a.store.InsertSession(ctx, t.SQL(), store.Session{ID: sessionID.String(), TokenHash: tokenHash,
			UserID: out.UserID, CreatedAt: now, ExpiresAt: out.ExpiresAt})
	})
	if err != nil {
		return SignedIn{}, err
	}
	return out, nil
}

// recordSignInAcceptances records, for an account a verified code created,
// the acceptances its request carried (source signin).
func (a *App) recordSignInAcceptances(ctx context.Context, t *writer.Tx, acct store.Account, stored []byte, now time.Time) error {
	var accepted []api.AcceptanceInput
	if len(stored) > 0 {
		if err := json.Unmarshal(stored, &accepted); err != nil {
			return fmt.Errorf("stored acceptances of a sign-in code: %w", err)
		}
	}
	for _, in := range accepted {
		if _, err := a.store.InsertAcceptance(ctx, t.SQL(), store.Acceptance{UserID: acct.UserID, DocumentID: in.DocumentID,
			Version: in.Version, ContentHash: in.ContentHash, Source: SourceSignIn, Email: *acct.Email, RecordedAt: now}); err != nil {
			return err
		}
	}
	return nil
}

// newSessionToken draws a session token (256 bits) and its stored hash.
func (a *App) newSessionToken() (token string, hash []byte, err error) {
	secret := make([]byte, 32)
	if _, err := io.ReadFull(a.rand, secret); err != nil {
		return "", nil, err
	}
	token = api.SessionTokenPrefix + base64.RawURLEncoding.EncodeToString(secret)
	return token, hashToken(token), nil
}

var errInvalidSession = &domain.Error{Code: domain.CodeInvalidAPIKey,
	Detail: "the session is unknown, ended or expired; sign in again"}

// AuthenticateSession resolves a session cookie's token. Unknown, ended and
// expired sessions give the same answer. On PostgreSQL every call reads the
// session (one indexed read), so a logout on one replica is refused on every
// other at once; on SQLite, this process being the only writer, the read is
// cached as keys are and dropped by every logout.
func (a *App) AuthenticateSession(ctx context.Context, token string) (Principal, error) {
	if !strings.HasPrefix(token, api.SessionTokenPrefix) || len(token) > 128 {
		return Principal{}, errInvalidSession
	}
	h := hashToken(token)
	known, ticket, ok := a.sessionCache.Get(sessionCacheScope, string(h))
	if !ok {
		s, acct, err := a.store.SessionByHash(ctx, h)
		if errors.Is(err, store.ErrNotFound) {
			return Principal{}, errInvalidSession
		}
		if err != nil {
			return Principal{}, err
		}
		known = knownSession{session: s, admin: acct.IsAdmin, email: acct.Email}
		a.sessionCache.Put(sessionCacheScope, ticket, string(h), known)
	}
	s := known.session
	if subtle.ConstantTimeCompare(s.TokenHash, h) != 1 || s.EndedAt != nil || !a.now().Before(s.ExpiresAt) {
		return Principal{}, errInvalidSession
	}
	return Principal{UserID: s.UserID, SessionID: s.ID, Kind: KindSession, IsAdmin: known.admin}, nil
}

// knownSession is a cached session row; its end and expiry are checked on
// every request against the row.
type knownSession struct {
	session store.Session
	admin   bool
	email   *string
}

// sessionCacheScope is the one scope of a.sessionCache: a logout drops every
// cached session (they are rare).
const sessionCacheScope = ""

var errSessionRequired = &domain.Error{Code: domain.CodeSessionRequired,
	Detail: "this route describes or ends a signed-in session: send the session cookie"}

// Session describes the caller's session.
func (a *App) Session(ctx context.Context, p Principal) (api.Session, error) {
	if p.Kind != KindSession {
		return api.Session{}, errSessionRequired
	}
	s, acct, err := a.sessionByID(ctx, p)
	if err != nil {
		return api.Session{}, err
	}
	info := api.Session{UserID: s.UserID, Admin: acct.IsAdmin, ExpiresAt: domain.FormatTimestamp(s.ExpiresAt)}
	if acct.Email != nil {
		info.Email = *acct.Email
	}
	return info, nil
}

func (a *App) sessionByID(ctx context.Context, p Principal) (store.Session, store.Account, error) {
	acct, err := a.store.Account(ctx, p.UserID)
	if err != nil {
		return store.Session{}, store.Account{}, err
	}
	s, err := a.store.SessionByID(ctx, p.SessionID)
	return s, acct, err
}

// Logout ends the caller's session at once, on every replica.
func (a *App) Logout(ctx context.Context, p Principal) error {
	if p.Kind != KindSession {
		return errSessionRequired
	}
	return a.w.Write(ctx, func(t *writer.Tx) error {
		writer.Invalidate(t, a.sessionCache, sessionCacheScope)
		return a.store.EndSession(ctx, t.SQL(), p.SessionID, a.now().UTC())
	})
}

// LogoutEverywhere ends every session of the caller's account at once, on
// every replica, the caller's own included (a person who lost a device signs
// out everywhere from another). Like Logout it is a signed-in person's act:
// an API key gets session_required. It returns how many sessions it ended.
func (a *App) LogoutEverywhere(ctx context.Context, p Principal) (int64, error) {
	if p.Kind != KindSession {
		return 0, errSessionRequired
	}
	var ended int64
	err := a.w.Write(ctx, func(t *writer.Tx) error {
		writer.Invalidate(t, a.sessionCache, sessionCacheScope)
		n, err := a.store.EndUserSessions(ctx, t.SQL(), p.UserID, a.now().UTC())
		ended = n
		return err
	})
	return ended, err
}
