package mail

import (
	"context"
	"log/slog"
)

// logTransport writes one line per message instead of sending it: the
// default, so a server needs no mail setup to start. The line names the
// recipient and the kind of message, never its subject or body: either can
// carry a one-time sign-in code, and a log is read by more people, and kept
// longer, than the recipient's mailbox (docs/decisions/mail.md). To read the
// messages themselves in development, use outbox:DIR.
type logTransport struct {
	log *slog.Logger
}

// deliver never fails: the line is the delivery.
func (t *logTransport) deliver(ctx context.Context, l *letter) error {
	t.log.LogAttrs(ctx, slog.LevelInfo, "mail",
		slog.String("provider", ProviderLog),
		slog.String("to", l.To),
		slog.String("kind", l.Kind),
		slog.String("message_id", l.messageID))
	return nil
}
