package api

// Legal agreements (SPEC.md "Legal document", "Acceptance", the Legal
// routes).

// LegalDocument is one served document; ContentHash is the lowercase hex
// SHA-256 of the exact text its TextURL serves.
type LegalDocument struct {
	DocumentID  string `json:"document_id"`
	Title       string `json:"title"`
	Summary     string `json:"summary"`
	Version     string `json:"version"`
	ContentHash string `json:"content_hash"`
	MediaType   string `json:"media_type"`
	Required    bool   `json:"required"`
	Status      string `json:"status"`
	TextURL     string `json:"text_url"`
}

// LegalDocuments answers GET /v1/legal/documents.
type LegalDocuments struct {
	Documents           []LegalDocument `json:"documents"`
	AcceptRoute         string          `json:"accept_route"`
	AcceptanceMode      string          `json:"acceptance_mode"`
	GateEnforced        bool            `json:"gate_enforced"`
	Notice              string          `json:"notice"`
	RequiredDocumentIDs []string        `json:"required_document_ids"`
}

// LegalText is a document's text and the headers that name it.
type LegalText struct {
	Text        string
	Version     string // X-Document-Version
	ContentHash string // X-Document-Content-Hash
}

// Acceptance is a recorded acceptance; Current is set in the acceptances
// list only.
type Acceptance struct {
	DocumentID  string `json:"document_id"`
	Version     string `json:"version"`
	ContentHash string `json:"content_hash"`
	Status      string `json:"status"`
	RecordedAt  string `json:"recorded_at"`
	Source      string `json:"source"`
	UserID      string `json:"user_id"`
	Email       string `json:"email"`
	Current     *bool  `json:"current,omitempty"`
}

// AcceptRequest is the body of POST /v1/legal/accept; every key is required.
type AcceptRequest struct {
	Accepted    *bool   `json:"accepted"`
	ContentHash *string `json:"content_hash" max:"name"`
	DocumentID  *string `json:"document_id" max:"name"`
	Version     *string `json:"version" max:"name"`
}

// AcceptResult answers POST /v1/legal/accept.
type AcceptResult struct {
	Acceptance       Acceptance `json:"acceptance"`
	Status           string     `json:"status"` // recorded
	UnmetDocumentIDs []string   `json:"unmet_document_ids"`
}

// Acceptances answers GET /v1/legal/acceptances.
type Acceptances struct {
	Acceptances         []Acceptance `json:"acceptances"`
	Email               *string      `json:"email"`
	RequiredDocumentIDs []string     `json:"required_document_ids"`
	UnmetDocumentIDs    []string     `json:"unmet_document_ids"`
}
