package main

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"mime/quotedprintable"
	"net/http"
	netmail "net/mail"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/mail/mailtest"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

// signInReply is one HTTP answer, its body read.
type signInReply struct {
	status  int
	cookies []*http.Cookie
	body    []byte
}

func (r signInReply) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("answer %d is not a JSON object: %v\n%s", r.status, err, r.body)
	}
	return m
}

// call sends a request to the serving process, with the session cookie when
// cookie is not "" and body as JSON when not nil.
func call(t *testing.T, method, url, cookie string, body any) signInReply {
	t.Helper()
	var header map[string]string
	if cookie != "" {
		header = map[string]string{"Cookie": (&http.Cookie{Name: "auditchain_session", Value: cookie}).String()}
	}
	return request(t, method, url, header, body)
}

// request sends a request with these headers, and body as JSON when not nil.
func request(t *testing.T, method, url string, header map[string]string, body any) signInReply {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", method, url, err)
	}
	return signInReply{status: resp.StatusCode, cookies: resp.Cookies(), body: b}
}

// requiredAcceptances accepts every required legal document at its served
// version, as a first sign-in must.
func requiredAcceptances(t *testing.T, base string) []map[string]any {
	t.Helper()
	r := call(t, "GET", base+"/v1/legal/documents", "", nil)
	var docs struct {
		Documents []struct {
			DocumentID  string `json:"document_id"`
			Version     string `json:"version"`
			ContentHash string `json:"content_hash"`
			Required    bool   `json:"required"`
		} `json:"documents"`
		RequiredDocumentIDs []string `json:"required_document_ids"`
	}
	if err := json.Unmarshal(r.body, &docs); r.status != 200 || err != nil {
		t.Fatalf("legal documents: %d %v\n%s", r.status, err, r.body)
	}
	var acceptances []map[string]any
	for _, d := range docs.Documents {
		if d.Required {
			acceptances = append(acceptances, map[string]any{"document_id": d.DocumentID, "version": d.Version, "content_hash": d.ContentHash})
		}
	}
	if len(acceptances) == 0 || len(acceptances) != len(docs.RequiredDocumentIDs) {
		t.Fatalf("%d required documents listed, %d required ids: %s", len(acceptances), len(docs.RequiredDocumentIDs), r.body)
	}
	return acceptances
}

var signInSubject = regexp.MustCompile(`^Your auditchain sign-in code: ([0-9]{8})$`)

// The whole sign-in as an operator runs it: the real serve command mailing
// through its SMTP transport to a real SMTP server, and a client over real
// HTTP that accepts the legal documents, reads the code from the message
// that arrived, signs in, uses the session, and signs out.
func TestServeSignInOverSMTP(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		// Plain SMTP without AUTH: the transport allows that to this machine.
		smtpd := &mailtest.Server{}
		smtpd.Start(t, nil)
		base, stop := startServe(t, map[string]string{"AUDITCHAIN_DB": dsn},
			"--mail", "smtp://"+smtpd.Addr(), "--mail-from", "Audit Chain <signin@audit.example>")
		const email = "e2e@example.com"

		// Accept every required document at its served version.
		acceptances := requiredAcceptances(t, base)

		r := call(t, "POST", base+"/v1/auth/otp/request", "", map[string]any{"email": email, "acceptances": acceptances})
		if r.status != 202 || r.json(t)["status"] != "sent" {
			t.Fatalf("otp request: %d %s", r.status, r.body)
		}

		// The request mails before it answers, and the server records a
		// message before it accepts it: it is here already.
		got := smtpd.Received()
		if len(got) != 1 {
			t.Fatalf("%d messages arrived, want 1", len(got))
		}
		if got[0].From != "signin@audit.example" || len(got[0].To) != 1 || got[0].To[0] != email {
			t.Fatalf("envelope from %q to %q, want from signin@audit.example to %s", got[0].From, got[0].To, email)
		}
		msg, err := netmail.ReadMessage(bytes.NewReader(got[0].Data))
		if err != nil {
			t.Fatalf("the message does not parse: %v\n%s", err, got[0].Data)
		}
		if to, err := msg.Header.AddressList("To"); err != nil || len(to) != 1 || to[0].Address != email {
			t.Errorf("To: %v (%v), want %s", to, err, email)
		}
		subject, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
		if err != nil {
			t.Fatalf("Subject %q: %v", msg.Header.Get("Subject"), err)
		}
		m := signInSubject.FindStringSubmatch(subject)
		if m == nil {
			t.Fatalf("Subject %q carries no 8-digit sign-in code", subject)
		}
		code := m[1]
		var text io.Reader = msg.Body
		if msg.Header.Get("Content-Transfer-Encoding") == "quoted-printable" {
			text = quotedprintable.NewReader(text)
		}
		body, err := io.ReadAll(text)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(body), code) {
			t.Errorf("the body does not repeat the code %s:\n%s", code, body)
		}

		r = call(t, "POST", base+"/v1/auth/otp/verify", "", map[string]any{"email": email, "code": code})
		if r.status != 200 {
			t.Fatalf("otp verify: %d %s", r.status, r.body)
		}
		verified := r.json(t)
		userID, _ := verified["user_id"].(string)
		if verified["email"] != email || userID == "" {
			t.Fatalf("otp verify: %s", r.body)
		}
		var cookie string
		for _, c := range r.cookies {
			if c.Name == "auditchain_session" {
				cookie = c.Value
			}
		}
		if cookie == "" {
			t.Fatalf("otp verify set no auditchain_session cookie: %v", r.cookies)
		}

		r = call(t, "GET", base+"/v1/auth/session", cookie, nil)
		if r.status != 200 {
			t.Fatalf("session: %d %s", r.status, r.body)
		}
		if info := r.json(t); info["email"] != email || info["user_id"] != userID {
			t.Fatalf("session: %s, want user %s with email %s", r.body, userID, email)
		}

		// The session manages keys, and the key it made works.
		r = call(t, "POST", base+"/v1/keys", cookie, map[string]any{"label": "made by a session"})
		if r.status != 201 {
			t.Fatalf("create key with the session: %d %s", r.status, r.body)
		}
		apiKey, _ := r.json(t)["api_key"].(string)
		if apiKey == "" {
			t.Fatalf("create key: no api_key in %s", r.body)
		}
		req, _ := http.NewRequest("GET", base+"/v1/keys", nil)
		req.Header.Set("X-API-Key", apiKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var list struct{ Count int }
		err = json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		if resp.StatusCode != 200 || err != nil || list.Count != 1 {
			t.Fatalf("GET /v1/keys with the new key: %d, %d keys (%v); want 200 and 1", resp.StatusCode, list.Count, err)
		}

		r = call(t, "POST", base+"/v1/auth/logout", cookie, nil)
		if r.status != 200 {
			t.Fatalf("logout: %d %s", r.status, r.body)
		}
		if len(r.cookies) != 1 || r.cookies[0].Name != "auditchain_session" || r.cookies[0].MaxAge >= 0 {
			t.Fatalf("logout did not clear the cookie: %v", r.cookies)
		}
		r = call(t, "GET", base+"/v1/auth/session", cookie, nil)
		if r.status != 401 {
			t.Fatalf("the session after logout: %d %s, want 401", r.status, r.body)
		}
		if code := r.json(t)["code"]; code != "invalid_or_expired_api_key" {
			t.Fatalf("the session after logout: code %v, want invalid_or_expired_api_key", code)
		}

		// The key the session made is a key.created notice: its email goes
		// out through the same mailer right after the commit.
		deadline := time.Now().Add(10 * time.Second)
		for len(smtpd.Received()) < 2 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		arrived := smtpd.Received()
		if len(arrived) != 2 {
			t.Fatalf("%d messages arrived in all, want 2 (the code, then the key.created notice)", len(got))
		}
		notice, err := netmail.ReadMessage(bytes.NewReader(arrived[1].Data))
		if err != nil {
			t.Fatal(err)
		}
		noticeBody, _ := io.ReadAll(notice.Body)
		if subj := notice.Header.Get("Subject"); !strings.Contains(subj, "API key created") || !strings.Contains(string(noticeBody), "Notice: key.created") {
			t.Errorf("second message: subject %q body %q, want the key.created notice", subj, noticeBody)
		}
		if err := stop(); err != nil {
			t.Fatalf("graceful shutdown returned %v", err)
		}
	})
}
