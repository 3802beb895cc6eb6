package mail_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/auditchain/auditchain/internal/mail"
)

var outboxName = regexp.MustCompile(`^20260314T150926\.535897000Z-[0-9a-f]{16}\.eml$`)

// outboxFiles lists dir as a reader of the outbox would: the .eml files, and
// separately anything else (there should be nothing else).
func outboxFiles(t *testing.T, dir string) (eml, other []string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") && strings.HasSuffix(e.Name(), ".eml") {
			eml = append(eml, e.Name())
		} else {
			other = append(other, e.Name())
		}
	}
	return eml, other
}

func TestOutboxWritesOneFilePerMessage(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mail", "outbox") // created by New
	m := newMailer(t, "outbox:"+dir, testOptions())
	if m.Provider() != "outbox" {
		t.Errorf("Provider = %q", m.Provider())
	}
	info, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm&^0o750 != 0 {
		t.Errorf("directory mode %v, want at most 0750", perm)
	}

	messages := []mail.Message{
		sampleMessage,
		{To: "ops@example.com", Subject: "Digest", Body: "plain ASCII\n"},
		{To: "<ops@example.com>", Subject: "", Body: ""},
	}
	for _, msg := range messages {
		if err := m.Send(context.Background(), msg); err != nil {
			t.Fatal(err)
		}
	}
	eml, other := outboxFiles(t, dir)
	if len(eml) != len(messages) || len(other) != 0 {
		t.Fatalf("outbox holds %v and %v, want %d .eml files and nothing else", eml, other, len(messages))
	}
	bySubject := map[string][]byte{}
	for _, name := range eml {
		if !outboxName.MatchString(name) {
			t.Errorf("file name %q", name)
		}
		path := filepath.Join(dir, name)
		if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, want mode 0600 (it may hold a sign-in code)", name, err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		bySubject[parseMessage(t, data).subject] = data
	}
	for _, msg := range messages {
		data, ok := bySubject[msg.Subject]
		if !ok {
			t.Errorf("no file has Subject %q", msg.Subject)
			continue
		}
		checkMessage(t, data, msg, "auditchain@localhost")
	}
	if s := m.Stats(); s != (mail.Stats{Sent: uint64(len(messages))}) {
		t.Errorf("Stats = %+v", s)
	}
}

func TestOutboxConcurrentSendsAndReader(t *testing.T) {
	dir := t.TempDir()
	m := newMailer(t, "outbox:"+dir, testOptions())
	const senders = 40
	const end = "-- end of message --"

	// A reader lists and reads the directory over and over while the
	// senders write: every .eml file it sees must already be whole.
	stop := make(chan struct{})
	readerDone := make(chan []string)
	go func() {
		var problems []string
		for reads := 0; ; reads++ {
			select {
			case <-stop:
				if reads == 0 {
					problems = append(problems, "the reader never ran")
				}
				readerDone <- problems
				return
			default:
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				problems = append(problems, err.Error())
				continue
			}
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), ".") || !strings.HasSuffix(e.Name(), ".eml") {
					continue
				}
				data, err := os.ReadFile(filepath.Join(dir, e.Name()))
				if err != nil {
					problems = append(problems, err.Error())
					continue
				}
				if p, err := decodeMessage(data); err != nil || !strings.HasSuffix(p.body, end+"\n") {
					problems = append(problems, fmt.Sprintf("%s read incomplete (%v): %q", e.Name(), err, data))
				}
			}
		}
	}()

	var wg sync.WaitGroup
	errs := make(chan error, senders)
	for i := range senders {
		wg.Go(func() {
			errs <- m.Send(context.Background(), mail.Message{
				To:      fmt.Sprintf("user%d@example.com", i),
				Subject: fmt.Sprintf("message %d", i),
				Body:    strings.Repeat(fmt.Sprintf("line of message %d\n", i), 200) + end + "\n",
			})
		})
	}
	wg.Wait()
	close(stop)
	for _, p := range <-readerDone {
		t.Error(p)
	}
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}

	eml, other := outboxFiles(t, dir)
	if len(eml) != senders || len(other) != 0 {
		t.Fatalf("%d .eml files and %v, want %d files and no temporary ones", len(eml), other, senders)
	}
	seen := map[string]bool{}
	for _, name := range eml {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		p := parseMessage(t, data)
		if seen[p.subject] {
			t.Errorf("two files hold %q", p.subject)
		}
		seen[p.subject] = true
		if !strings.HasSuffix(p.body, end+"\n") {
			t.Errorf("%s is incomplete", name)
		}
	}
	if s := m.Stats(); s != (mail.Stats{Sent: senders}) {
		t.Errorf("Stats = %+v", s)
	}
}

func TestOutboxFailureCountsOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "outbox")
	m := newMailer(t, "outbox:"+dir, testOptions())
	// The directory goes away after start: every attempt fails, and the
	// failure counts once, after the attempts allowed.
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	err := m.Send(context.Background(), sampleMessage)
	if err == nil || !strings.Contains(err.Error(), "after 3 attempts") {
		t.Fatalf("Send error %v", err)
	}
	if s := m.Stats(); s != (mail.Stats{Failed: 1, Retries: 2}) {
		t.Errorf("Stats = %+v", s)
	}
}
