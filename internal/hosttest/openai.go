package hosttest

import (
	"encoding/json"
	"net/http"
)

// The OpenAI Responses API as Codex CLI calls it through a custom provider
// with wire_api = "responses": POST /v1/responses, streamed with SSE. Codex
// reads response.output_item.done for each item and needs
// response.completed before the stream ends.

type responsesRequest struct {
	Model  string          `json:"model"`
	Stream bool            `json:"stream"`
	Input  json.RawMessage `json:"input"`
	Tools  []struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tools"`
}

type responsesItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Input     string          `json:"input"`
	Output    json.RawMessage `json:"output"`
}

func (s *Server) openai(w http.ResponseWriter, req *Request) int {
	if req.Method != http.MethodPost {
		return notFound(w, req)
	}
	var in responsesRequest
	if !decode(w, req, &in) {
		return http.StatusBadRequest
	}
	req.Model, req.Stream = in.Model, in.Stream
	freeform := map[string]bool{}
	for _, t := range in.Tools {
		if t.Name == "" {
			continue // built-in tools (web_search, …) carry no name
		}
		req.Tools = append(req.Tools, Tool{Name: t.Name, Freeform: t.Type == "custom"})
		freeform[t.Name] = t.Type == "custom"
	}
	var items []responsesItem
	if json.Unmarshal(in.Input, &items) != nil {
		req.Messages = addTurn(req.Messages, Message{Role: "user", Text: textOf(in.Input)})
	}
	for _, it := range items {
		if m, ok := responsesMessage(it); ok {
			req.Messages = addTurn(req.Messages, m)
		}
	}
	rep := s.reply(req, "call_hosttest_", "hosttest")

	var output []map[string]any
	for _, c := range rep.Calls {
		if freeform[c.Name] {
			var text string
			_ = json.Unmarshal(c.Input, &text)
			output = append(output, map[string]any{"type": "custom_tool_call", "id": "ctc_" + c.ID, "call_id": c.ID, "name": c.Name, "input": text, "status": "completed"})
			continue
		}
		output = append(output, map[string]any{"type": "function_call", "id": "fc_" + c.ID, "call_id": c.ID, "name": c.Name, "arguments": string(c.Input), "status": "completed"})
	}
	if rep.Text != "" {
		output = append([]map[string]any{{
			"type": "message", "id": "msg_hosttest", "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": rep.Text, "annotations": []any{}}},
		}}, output...)
	}
	resp := map[string]any{
		"id": "resp_hosttest", "object": "response", "status": "completed", "model": in.Model, "output": output,
		"usage": map[string]any{
			"input_tokens": 1, "input_tokens_details": map[string]any{"cached_tokens": 0},
			"output_tokens": 1, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
			"total_tokens": 2,
		},
	}
	if !in.Stream {
		writeJSON(w, http.StatusOK, resp)
		return http.StatusOK
	}
	e := newSSE(w)
	seq := 0
	send := func(typ string, ev map[string]any) {
		ev["type"], ev["sequence_number"] = typ, seq
		seq++
		e.event(typ, ev)
	}
	created := map[string]any{"id": "resp_hosttest", "object": "response", "status": "in_progress", "model": in.Model, "output": []any{}}
	send("response.created", map[string]any{"response": created})
	for i, item := range output {
		send("response.output_item.added", map[string]any{"output_index": i, "item": item})
		if item["type"] == "message" {
			send("response.output_text.delta", map[string]any{"output_index": i, "item_id": item["id"], "content_index": 0, "delta": rep.Text})
		}
		send("response.output_item.done", map[string]any{"output_index": i, "item": item})
	}
	send("response.completed", map[string]any{"response": resp})
	return http.StatusOK
}

// responsesMessage maps one input item to a conversation turn: the model's
// items (messages, calls, reasoning) to assistant, tool outputs and user
// messages to user; developer and system messages are the prompt.
func responsesMessage(it responsesItem) (Message, bool) {
	switch it.Type {
	case "message", "":
		switch it.Role {
		case "user":
			return Message{Role: "user", Text: textOf(it.Content)}, true
		case "assistant":
			return Message{Role: "assistant", Text: textOf(it.Content)}, true
		}
	case "function_call":
		return Message{Role: "assistant", Calls: []Call{{ID: it.CallID, Name: it.Name, Input: json.RawMessage(orEmpty(it.Arguments))}}}, true
	case "custom_tool_call":
		in, _ := json.Marshal(it.Input)
		return Message{Role: "assistant", Calls: []Call{{ID: it.CallID, Name: it.Name, Input: in}}}, true
	case "function_call_output", "custom_tool_call_output":
		return Message{Role: "user", Results: []Result{{CallID: it.CallID, Output: responsesOutput(it.Output)}}}, true
	case "reasoning":
		return Message{Role: "assistant"}, true
	}
	return Message{}, false
}

// responsesOutput answers a tool output's text: a string, a list of content
// items, or (older Codex) an object with "content".
func responsesOutput(raw json.RawMessage) string {
	var obj struct {
		Content string `json:"content"`
	}
	if json.Unmarshal(raw, &obj) == nil && obj.Content != "" {
		return obj.Content
	}
	return textOf(raw)
}

func orEmpty(args string) string {
	if args == "" {
		return "{}"
	}
	return args
}
