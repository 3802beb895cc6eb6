package hosttest

import (
	"encoding/json"
	"net/http"
	"strings"
)

// The Anthropic Messages API as Claude Code calls it: POST /v1/messages
// (streamed with SSE when "stream" is set), /v1/messages/count_tokens, and
// GET /v1/models.

type anthropicRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

func (s *Server) anthropic(w http.ResponseWriter, req *Request) int {
	switch {
	case req.Path == "/v1/models" || strings.HasPrefix(req.Path, "/v1/models?"):
		writeJSON(w, http.StatusOK, map[string]any{"data": []any{}, "has_more": false, "first_id": nil, "last_id": nil})
		return http.StatusOK
	case strings.HasPrefix(req.Path, "/v1/messages/count_tokens"):
		writeJSON(w, http.StatusOK, map[string]any{"input_tokens": 1})
		return http.StatusOK
	case req.Path != "/v1/messages" && !strings.HasPrefix(req.Path, "/v1/messages?"):
		return notFound(w, req)
	}
	var in anthropicRequest
	if !decode(w, req, &in) {
		return http.StatusBadRequest
	}
	req.Model, req.Stream = in.Model, in.Stream
	for _, t := range in.Tools {
		req.Tools = append(req.Tools, Tool{Name: t.Name})
	}
	for _, m := range in.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			continue
		}
		req.Messages = addTurn(req.Messages, anthropicMessage(m.Role, m.Content))
	}
	rep := s.reply(req, "toolu_hosttest_", "hosttest")

	msg := map[string]any{
		"id": "msg_hosttest", "type": "message", "role": "assistant", "model": in.Model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 1, "output_tokens": 1},
	}
	stop := "end_turn"
	if len(rep.Calls) > 0 {
		stop = "tool_use"
	}
	if !in.Stream {
		var content []any
		if rep.Text != "" {
			content = append(content, map[string]any{"type": "text", "text": rep.Text})
		}
		for _, c := range rep.Calls {
			content = append(content, map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": c.Input})
		}
		msg["content"], msg["stop_reason"] = content, stop
		writeJSON(w, http.StatusOK, msg)
		return http.StatusOK
	}
	e := newSSE(w)
	e.event("message_start", map[string]any{"type": "message_start", "message": msg})
	i := 0
	if rep.Text != "" {
		e.event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}})
		e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "text_delta", "text": rep.Text}})
		e.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
		i++
	}
	for _, c := range rep.Calls {
		e.event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": map[string]any{}}})
		e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(c.Input)}})
		e.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
		i++
	}
	e.event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 1}})
	e.event("message_stop", map[string]any{"type": "message_stop"})
	return http.StatusOK
}

func anthropicMessage(role string, content json.RawMessage) Message {
	m := Message{Role: role}
	var blocks []anthropicBlock
	if json.Unmarshal(content, &blocks) != nil {
		m.Text = textOf(content)
		return m
	}
	var texts []string
	for _, b := range blocks {
		switch b.Type {
		case "text":
			texts = append(texts, b.Text)
		case "tool_use":
			m.Calls = append(m.Calls, Call{ID: b.ID, Name: b.Name, Input: b.Input})
		case "tool_result":
			m.Results = append(m.Results, Result{CallID: b.ToolUseID, Output: textOf(b.Content), IsError: b.IsError})
		}
	}
	m.Text = strings.Join(texts, "\n")
	return m
}
