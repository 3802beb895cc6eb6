package mail_test

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"mime/quotedprintable"
	netmail "net/mail"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/mail"
)

var testNow = time.Date(2026, 3, 14, 15, 9, 26, 535897000, time.UTC)

// testOptions: no waiting between attempts, a fixed clock, short attempts.
func testOptions() mail.Options {
	return mail.Options{
		Timeout: 5 * time.Second,
		Backoff: func(int) time.Duration { return 0 },
		Now:     func() time.Time { return testNow },
	}
}

func newMailer(t *testing.T, spec string, o mail.Options) *mail.Mailer {
	t.Helper()
	m, err := mail.New(spec, o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

// parsed is a received message read back with net/mail.
type parsed struct {
	header  netmail.Header
	subject string
	body    string // decoded, line ends as LF
}

func parseMessage(t *testing.T, data []byte) parsed {
	t.Helper()
	p, err := decodeMessage(data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	return p
}

// decodeMessage reads data with net/mail and decodes its subject and body.
func decodeMessage(data []byte) (parsed, error) {
	msg, err := netmail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		return parsed{}, fmt.Errorf("net/mail cannot read the message: %w", err)
	}
	subject, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	if err != nil {
		return parsed{}, fmt.Errorf("Subject %q: %w", msg.Header.Get("Subject"), err)
	}
	var body io.Reader = msg.Body
	if msg.Header.Get("Content-Transfer-Encoding") == "quoted-printable" {
		body = quotedprintable.NewReader(body)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return parsed{}, fmt.Errorf("body: %w", err)
	}
	return parsed{header: msg.Header, subject: subject, body: strings.ReplaceAll(string(b), "\r\n", "\n")}, nil
}

// checkMessage checks everything a recipient relies on.
func checkMessage(t *testing.T, data []byte, want mail.Message, wantFrom string) {
	t.Helper()
	p := parseMessage(t, data)
	from, err := p.header.AddressList("From")
	if err != nil || len(from) != 1 || from[0].Address != wantFrom {
		t.Errorf("From = %v (%v), want %s", from, err, wantFrom)
	}
	wantTo, _ := netmail.ParseAddress(want.To)
	to, err := p.header.AddressList("To")
	if err != nil || len(to) != 1 || to[0].Address != wantTo.Address || to[0].Name != wantTo.Name {
		t.Errorf("To = %v (%v), want %v", to, err, wantTo)
	}
	if p.subject != want.Subject {
		t.Errorf("Subject = %q, want %q", p.subject, want.Subject)
	}
	if date, err := p.header.Date(); err != nil || !date.Equal(testNow.Truncate(time.Second)) {
		t.Errorf("Date = %v (%v), want %v", date, err, testNow)
	}
	if id := p.header.Get("Message-ID"); !regexp.MustCompile(`^<[0-9a-f]{32}@[^<>@\s]+>$`).MatchString(id) {
		t.Errorf("Message-ID = %q", id)
	}
	if v := p.header.Get("MIME-Version"); v != "1.0" {
		t.Errorf("MIME-Version = %q", v)
	}
	mediaType, params, err := mime.ParseMediaType(p.header.Get("Content-Type"))
	if err != nil || mediaType != "text/plain" || !strings.EqualFold(params["charset"], "utf-8") {
		t.Errorf("Content-Type = %q", p.header.Get("Content-Type"))
	}
	if cte := p.header.Get("Content-Transfer-Encoding"); cte != "quoted-printable" {
		t.Errorf("Content-Transfer-Encoding = %q", cte)
	}
	if p.body != want.Body {
		t.Errorf("body = %q, want %q", p.body, want.Body)
	}
	for i, line := range bytes.Split(data, []byte("\r\n")) {
		if len(line) > 78 {
			t.Errorf("line %d is %d octets long", i+1, len(line))
		}
	}
}

// A body that tests the transfer encoding: non-ASCII, a lone dot (SMTP's end
// of data), a long line, a line starting "From ".
var sampleMessage = mail.Message{
	To:      "Zoë Tester <zoe@example.com>",
	Subject: "Your sign-in code — 428 913",
	Body: "Your code is 428913. It expires in 10 minutes.\n.\nFrom the auditchain service: ünïcödé ✓\n" +
		strings.Repeat("long line ", 30) + "\n",
}

// logBuffer is a concurrency-safe sink for a test's slog output.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
