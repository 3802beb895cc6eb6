package mail

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/auditchain/auditchain/internal/durable"
)

// outboxTransport writes each message as an RFC 5322 file in a directory, for
// tests and for an operator who hands mail to another program.
type outboxTransport struct {
	dir string
	log *slog.Logger
}

// tempPrefix starts every partial file's name. The leading dot hides it from
// a reader that skips dot files, and it lacks the .eml suffix for one that
// lists *.eml: either way no reader sees a message before it is whole.
const tempPrefix = ".partial-"

func newOutbox(dir string, log *slog.Logger) (*outboxTransport, error) {
	if dir == "" {
		return nil, errors.New("mail: outbox needs a directory: outbox:DIR")
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("mail: outbox directory: %w", err)
	}
	return &outboxTransport{dir: dir, log: log}, nil
}

// deliver writes DIR/<UTC timestamp>-<random hex>.eml atomically: the
// message goes to a temporary file in DIR, is synced, then renamed into
// place, so the name appears only once the content is complete and on disk.
// The timestamp makes a listing sort in sending order; the random part keeps
// names distinct when messages share a timestamp.
func (t *outboxTransport) deliver(ctx context.Context, l *letter) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	name := filepath.Join(t.dir,
		l.date.UTC().Format("20060102T150405.000000000Z")+"-"+randomHex(8)+".eml")
	f, err := os.CreateTemp(t.dir, tempPrefix+"*")
	if err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	w := bufio.NewWriter(f)
	if _, err := l.rfc5322.WriteTo(w); err != nil {
		return fmt.Errorf("outbox: writing the message: %w", err)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("outbox: writing the message: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	if err := os.Rename(f.Name(), name); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	// The rename survives a crash once the directory is synced. The message
	// is already whole under its name, so a failure here is only logged:
	// returning it would make Send write the message a second time.
	if err := durable.SyncDir(t.dir); err != nil {
		t.log.Warn("outbox: syncing the directory failed", "file", name, "error", err)
	}
	return nil
}
