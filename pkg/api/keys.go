package api

// Credentials and operations (CONTRACT.md "Credentials"; GET /v1/health).

// Key is an API key's metadata as every listing shows it; the token never
// appears after creation.
type Key struct {
	ID        string   `json:"id"`
	Prefix    string   `json:"prefix"`
	Machine   string   `json:"machine"`
	Label     string   `json:"label"`
	Scopes    []string `json:"scopes"` // empty: unscoped (every capability)
	CreatedAt string   `json:"created_at"`
	ExpiresAt *string  `json:"expires_at"`
	RevokedAt *string  `json:"revoked_at"`
}

// CreateKeyRequest is the body of POST /v1/keys; every field is optional.
type CreateKeyRequest struct {
	Scopes    []string `json:"scopes,omitempty" max:"list" each:"name"`
	Machine   *string  `json:"machine,omitempty"` // capped by the key rules
	Label     *string  `json:"label,omitempty"`
	ExpiresAt *string  `json:"expires_at,omitempty" max:"name"`
}

// KeyCreated answers POST /v1/keys (201): the token is shown this once.
type KeyCreated struct {
	Key
	APIKey string `json:"api_key"`
}

// KeyList answers GET /v1/keys (newest first).
type KeyList struct {
	Count int   `json:"count"`
	Keys  []Key `json:"keys"`
}

// KeyRevoked answers POST /v1/keys/{key_id}/revoke.
type KeyRevoked struct {
	Key Key `json:"key"`
}

// Health answers GET /v1/health.
type Health struct {
	Status string `json:"status"` // ok
	Store  string `json:"store"`  // sqlite or postgres
	// Version is the build's ("v1.2.3", or "devel+<commit>" from a work tree).
	Version string `json:"version"`
}
