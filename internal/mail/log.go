package mail

import (
	"context"
	"log/slog"
)

// logTransport writes one line per message instead of sending it: the
// default, so a development server needs no mail setup to show a sign-in code.
type logTransport struct {
	log        *slog.Logger
	production bool
}

// deliver never fails: the line is the delivery.
func (t *logTransport) deliver(ctx context.Context, l *letter) error {
	attrs := []slog.Attr{
		slog.String("provider", ProviderLog),
		slog.String("to", l.To),
		slog.String("subject", l.Subject),
		slog.String("message_id", l.messageID),
	}
	if t.production {
		// Bodies carry one-time codes; production logs outlive them and
		// reach more readers than the recipient.
		attrs = append(attrs, slog.String("body", "body withheld in production"))
	} else {
		attrs = append(attrs, slog.String("body", l.Body))
	}
	t.log.LogAttrs(ctx, slog.LevelInfo, "mail", attrs...)
	return nil
}
