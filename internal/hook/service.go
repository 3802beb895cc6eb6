package hook

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"

	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
)

// ClientService is the Service of a real auditchain, through pkg/client
// (surface hook).
type ClientService struct {
	C *client.Client
	// TipFile, when set, keeps the chain tip between hook processes: read
	// before the first append, rewritten after each one. It is a hint: a
	// stale one costs the 409 the client follows, a current one spares the
	// tip read (one round trip of every call).
	TipFile string
	tipRead bool
}

// GateCall implements Service; the recorded tool_call becomes the tip kept
// in TipFile, which the tool_result of the same call extends.
func (s *ClientService) GateCall(ctx context.Context, req api.ToolCallRequest) (*api.ToolCallResponse, error) {
	res, err := s.C.GateToolCall(ctx, req)
	if err == nil && s.TipFile != "" {
		s.tipRead = true // the client's tip is the service's answer now
		s.keepTip(res.Event.Sequence, res.Event.PayloadHash)
	}
	return res, err
}

// Append implements Service: the client fills sequence and prev_hash from
// the tip and follows it. The event keeps the hook's id, raw, decision,
// tool and parent; its ts is the client's clock.
func (s *ClientService) Append(ctx context.Context, ev *api.EventInput) error {
	if ev.Raw == nil {
		return errors.New("hook: an event without raw")
	}
	if s.TipFile != "" && !s.tipRead {
		s.tipRead = true
		var t api.ChainTip
		if b, err := os.ReadFile(s.TipFile); err == nil && json.Unmarshal(b, &t) == nil && t.Sequence != nil && t.PayloadHash != nil {
			s.C.SetTip(t)
		}
	}
	out, err := s.C.Append(ctx, client.Event{EventID: ev.EventID, EventType: ev.EventType, Raw: ev.Raw,
		Decision: ev.Decision, Tool: ev.Tool, ParentID: ev.ParentID})
	if err == nil && s.TipFile != "" {
		s.keepTip(out.Event.Sequence, out.Event.PayloadHash)
	}
	return err
}

// keepTip writes the tip hint for the next hook process.
func (s *ClientService) keepTip(seq int64, hash string) {
	if b, err := json.Marshal(api.ChainTip{Sequence: &seq, PayloadHash: &hash}); err == nil {
		writeHint(s.TipFile, b)
	}
}

// writeHint replaces path's content through a rename, without syncing: a
// hint lost in a crash only costs a round trip.
func writeHint(path string, data []byte) {
	f, err := os.CreateTemp(filepath.Dir(path), ".tip-*")
	if err != nil {
		if os.MkdirAll(filepath.Dir(path), 0o700) != nil {
			return
		}
		if f, err = os.CreateTemp(filepath.Dir(path), ".tip-*"); err != nil {
			return
		}
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
}

// Tip implements Service.
func (s *ClientService) Tip(ctx context.Context) (*api.ChainTip, error) { return s.C.Tip(ctx) }

// AppendBatch implements Service.
func (s *ClientService) AppendBatch(ctx context.Context, rows []api.EventInput) (*api.BatchResponse, error) {
	return s.C.AppendBatch(ctx, api.BatchRequest{Events: rows})
}
