package monitor

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"github.com/auditchain/auditchain/internal/durable"
	"github.com/auditchain/auditchain/internal/notify/webhook"
)

// Monitor runs Check on an interval, writes the state when the pin moves,
// and reports each alarm once: on Report and, with a Webhook, as a POST.
type Monitor struct {
	Source    Source
	StatePath string
	Options   Options
	Interval  time.Duration
	// Webhook, when not empty, receives each alarm's evidence (WebhookBody)
	// as a JSON POST (docs/integrity.md "Monitor").
	Webhook string
	// WebhookSecret, when not empty, signs each post per Standard Webhooks
	// (a whsec_ secret the receiver holds too): webhook-id, webhook-timestamp
	// and webhook-signature, as the service's own webhooks are signed.
	WebhookSecret string
	// Now stamps a signed post (webhook-timestamp); time.Now when nil.
	Now  func() time.Time
	HTTP *http.Client
	// Report receives every Result, and each error of a poll that could not
	// be made; it must not keep r past the call.
	Report func(r *Result, err error)
}

// WebhookBody is what the webhook receives: the alarm, evidence in full.
type WebhookBody struct {
	Type  string `json:"type"` // "auditchain.monitor.alarm"
	Alarm *Alarm `json:"alarm"`
}

// ErrStateInUse is the answer of Once and Run while another monitor (or
// `chain verify --pin`) holds the same state file's lock.
var ErrStateInUse = errors.New("another monitor is using this state file")

// lockState makes this the only monitor of StatePath until release: two
// monitors reading and writing one pin could write an older checkpoint over
// a newer one, and a rollback between the two would then go unseen. The lock
// is "<state>.lock" (durable.TryLock: released by the kernel when the
// process ends). Where that file cannot be created (a read-only directory or
// mount), the state cannot be written either, so no two monitors can race
// on it: the check runs unlocked and fails only if the pin must move.
func (m *Monitor) lockState() (release func(), err error) {
	lock := m.StatePath + ".lock"
	release, held, err := durable.TryLock(lock)
	switch {
	case errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS):
		return func() {}, nil
	case err != nil:
		return nil, fmt.Errorf("lock the state: %w", err)
	case !held:
		return nil, fmt.Errorf("%w: %s (%s: %s); run one monitor per state file", ErrStateInUse, m.StatePath, lock, durable.HeldBy)
	}
	return release, nil
}

// Once runs one check: the state is read, checked and, when the pin moved,
// written; an alarm is posted to the webhook. The Result carries the alarm.
func (m *Monitor) Once(ctx context.Context) (*Result, error) {
	release, err := m.lockState()
	if err != nil {
		return nil, err
	}
	defer release()
	s, err := ReadState(m.StatePath)
	if err != nil {
		return nil, err
	}
	before := s.Checkpoint
	r, err := Check(ctx, m.Source, s, m.Options)
	if err != nil {
		return nil, err
	}
	if r.Alarm != nil {
		if m.Webhook != "" {
			if err := m.post(ctx, r.Alarm); err != nil {
				return r, fmt.Errorf("webhook: %w", err)
			}
		}
		return r, nil
	}
	if s.Checkpoint != before {
		if err := WriteState(m.StatePath, s); err != nil {
			return r, fmt.Errorf("write state: %w", err)
		}
	}
	return r, nil
}

// Run checks every Interval until ctx ends, holding the state file's lock
// throughout. An alarm does not end it (the pin stays where it was, so the
// next poll sees the same conflict): the same evidence is reported and
// posted once, a new conflict again.
func (m *Monitor) Run(ctx context.Context) error {
	release, err := m.lockState()
	if err != nil {
		return err
	}
	defer release()
	t := time.NewTicker(m.Interval)
	defer t.Stop()
	var last string
	for {
		s, err := ReadState(m.StatePath)
		if err != nil {
			return err
		}
		before := s.Checkpoint
		r, err := Check(ctx, m.Source, s, m.Options)
		switch {
		case err != nil:
			m.Report(nil, err)
		case r.Alarm != nil:
			if key := r.Alarm.Kind + "\x00" + r.Alarm.Observed.Note; key != last {
				m.Report(r, nil)
				if m.Webhook != "" {
					if err := m.post(ctx, r.Alarm); err != nil {
						m.Report(nil, fmt.Errorf("webhook: %w", err))
					} else {
						last = key
					}
				} else {
					last = key
				}
			}
		default:
			if s.Checkpoint != before {
				if err := WriteState(m.StatePath, s); err != nil {
					return fmt.Errorf("write state: %w", err)
				}
			}
			m.Report(r, nil)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (m *Monitor) post(ctx context.Context, a *Alarm) error {
	b, err := json.Marshal(WebhookBody{Type: "auditchain.monitor.alarm", Alarm: a})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.Webhook, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if m.WebhookSecret != "" {
		now := time.Now
		if m.Now != nil {
			now = m.Now
		}
		ts, id := now(), alarmID(a)
		sig, err := webhook.Sign(m.WebhookSecret, id, ts, b)
		if err != nil {
			return err
		}
		req.Header.Set("webhook-id", id)
		req.Header.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
		req.Header.Set("webhook-signature", sig)
	}
	c := m.HTTP
	if c == nil {
		c = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s answered %s", m.Webhook, resp.Status)
	}
	return nil
}

// alarmID is a signed post's webhook-id: the same for the same evidence
// (kind and the notes it holds), so a receiver that deduplicates by id, as
// Standard Webhooks asks, sees one alarm when a post that failed is tried
// again at the next poll, whose detected_at differs.
func alarmID(a *Alarm) string {
	h := sha256.New()
	h.Write([]byte(a.Kind))
	for _, c := range []*Checkpoint{a.Pinned, a.Observed, a.AtPinnedSize, a.Witnessed} {
		h.Write([]byte{0})
		if c != nil {
			h.Write([]byte(c.Note))
		}
	}
	return "alarm_" + hex.EncodeToString(h.Sum(nil)[:16])
}
