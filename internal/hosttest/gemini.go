package hosttest

import (
	"encoding/json"
	"net/http"
	"strings"
)

// The Gemini API as Gemini CLI calls it with GOOGLE_GEMINI_BASE_URL:
// POST /v1beta/models/{model}:streamGenerateContent?alt=sse for its turns,
// :generateContent for side requests (model routing, next-speaker checks),
// :countTokens.

type geminiRequest struct {
	Contents []struct {
		Role  string       `json:"role"`
		Parts []geminiPart `json:"parts"`
	} `json:"contents"`
	Tools []struct {
		FunctionDeclarations []struct {
			Name string `json:"name"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
	GenerationConfig struct {
		ResponseMimeType   string          `json:"responseMimeType"`
		ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
		ResponseSchema     json.RawMessage `json:"responseSchema"`
	} `json:"generationConfig"`
}

type geminiPart struct {
	Text         string `json:"text"`
	Thought      bool   `json:"thought"`
	FunctionCall *struct {
		ID   string          `json:"id"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"functionCall"`
	FunctionResponse *struct {
		ID       string          `json:"id"`
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse"`
}

func (s *Server) gemini(w http.ResponseWriter, req *Request) int {
	path := req.Path
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	model, method, _ := strings.Cut(path[strings.LastIndexByte(path, '/')+1:], ":")
	req.Model = model
	switch method {
	case "countTokens":
		writeJSON(w, http.StatusOK, map[string]any{"totalTokens": 1})
		return http.StatusOK
	case "generateContent", "streamGenerateContent":
	default:
		return notFound(w, req)
	}
	var in geminiRequest
	if !decode(w, req, &in) {
		return http.StatusBadRequest
	}
	req.Stream = method == "streamGenerateContent"
	for _, t := range in.Tools {
		for _, f := range t.FunctionDeclarations {
			req.Tools = append(req.Tools, Tool{Name: f.Name})
		}
	}
	for _, c := range in.Contents {
		role := "user"
		if c.Role == "model" {
			role = "assistant"
		}
		req.Messages = addTurn(req.Messages, geminiMessage(role, c.Parts))
	}
	rep := s.reply(req, "hosttest_call_", geminiSide(in))

	var parts []any
	if rep.Text != "" {
		parts = append(parts, map[string]any{"text": rep.Text})
	}
	for _, c := range rep.Calls {
		parts = append(parts, map[string]any{"functionCall": map[string]any{"id": c.ID, "name": c.Name, "args": c.Input}})
	}
	resp := map[string]any{
		"candidates": []any{map[string]any{
			"content":      map[string]any{"role": "model", "parts": parts},
			"finishReason": "STOP", "index": 0,
		}},
		"usageMetadata": map[string]any{"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
		"modelVersion":  model,
	}
	if !req.Stream {
		writeJSON(w, http.StatusOK, resp)
		return http.StatusOK
	}
	newSSE(w).event("", resp)
	return http.StatusOK
}

func geminiMessage(role string, parts []geminiPart) Message {
	m := Message{Role: role}
	var texts []string
	for _, p := range parts {
		switch {
		case p.FunctionCall != nil:
			m.Calls = append(m.Calls, Call{ID: p.FunctionCall.ID, Name: p.FunctionCall.Name, Input: p.FunctionCall.Args})
		case p.FunctionResponse != nil:
			m.Results = append(m.Results, geminiResult(p.FunctionResponse.ID, p.FunctionResponse.Name, p.FunctionResponse.Response))
		case p.Text != "" && !p.Thought:
			texts = append(texts, p.Text)
		}
	}
	m.Text = strings.Join(texts, "\n")
	return m
}

// geminiResult reads a functionResponse: Gemini CLI answers {"output": …}
// when the tool ran and {"error": …} when it did not.
func geminiResult(id, name string, raw json.RawMessage) Result {
	var resp struct {
		Output *string `json:"output"`
		Error  *string `json:"error"`
	}
	res := Result{CallID: id, Name: name, Output: string(raw)}
	if json.Unmarshal(raw, &resp) == nil {
		switch {
		case resp.Error != nil:
			res.Output, res.IsError = *resp.Error, true
		case resp.Output != nil:
			res.Output = *resp.Output
		}
	}
	return res
}

// geminiSide answers a side request: plain text, or for one that asks for
// JSON (Gemini CLI's model router, its next-speaker check) the smallest value
// of the requested schema, so the host goes on without logging a parse error.
func geminiSide(in geminiRequest) string {
	schema := in.GenerationConfig.ResponseJSONSchema
	if len(schema) == 0 {
		schema = in.GenerationConfig.ResponseSchema
	}
	if in.GenerationConfig.ResponseMimeType != "application/json" {
		return "hosttest"
	}
	b, _ := json.Marshal(exampleOf(schema))
	return string(b)
}

// exampleOf answers a value of a JSON schema (or Gemini's upper-case variant
// of one): the first of an enum (the next-speaker check lists "user" first,
// which ends the turn), 1 for numbers, every property of an object.
func exampleOf(raw json.RawMessage) any {
	var sc struct {
		Type       string                     `json:"type"`
		Enum       []any                      `json:"enum"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(raw, &sc) != nil {
		return map[string]any{}
	}
	if len(sc.Enum) > 0 {
		return sc.Enum[0]
	}
	switch strings.ToLower(sc.Type) {
	case "string":
		return "hosttest"
	case "integer", "number":
		return 1
	case "boolean":
		return false
	case "array":
		return []any{}
	}
	obj := map[string]any{}
	for name, p := range sc.Properties {
		obj[name] = exampleOf(p)
	}
	return obj
}
