// Package witnessclient submits checkpoints to a witness as C2SP
// tlog-witness states it (https://c2sp.org/tlog-witness): POST
// <url>/add-checkpoint with the old size, a consistency proof from it and
// the checkpoint note; the witness answers its cosignature as note
// signature lines (C2SP tlog-cosignature), or 409 with the size it holds.
//
// Witnesses are operator-configured (serve --witness), not user input, so
// the client is a plain net/http client with a timeout: it does not go
// through the webhooks' SSRF-safe egress, and reaches loopback and private
// networks, where operators may run their witnesses (docs/operations.md
// "Witnesses").
package witnessclient

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/auditchain/auditchain/pkg/verify"
)

// Timeout bounds one add-checkpoint request.
const Timeout = 10 * time.Second

// maxAnswer bounds the answer read: a few signature lines.
const maxAnswer = 64 << 10

// Client submits to one witness.
type Client struct {
	// URL is the witness's prefix: requests go to URL + "/add-checkpoint".
	URL     string
	Witness verify.Witness
	HTTP    *http.Client // nil: a client with Timeout
}

// ConflictError is the witness's 409: it holds Size for the origin, not
// the old size submitted.
type ConflictError struct{ Size uint64 }

func (e *ConflictError) Error() string {
	return fmt.Sprintf("witness holds size %d (409 Conflict)", e.Size)
}

// RefusedError is any other answer but 200: 403 (the log's signature is
// not one the witness trusts), 404 (an origin it does not witness), 422
// (the consistency proof or the root does not hold: a fork), 400, 429, 5xx.
type RefusedError struct {
	Status int
	Body   string
}

func (e *RefusedError) Error() string {
	msg := fmt.Sprintf("witness answered %d %s", e.Status, http.StatusText(e.Status))
	if e.Status == http.StatusUnprocessableEntity {
		msg += " (the checkpoint is not consistent with what it cosigned before)"
	}
	if e.Body != "" {
		msg += ": " + e.Body
	}
	return msg
}

// ErrNoCosignature is a 200 whose answer holds no valid cosignature by the
// configured key.
var ErrNoCosignature = errors.New("the witness answered no cosignature that verifies under its configured key")

// Body is the add-checkpoint request body: "old <size>", the proof hashes in
// standard base64 one a line, a blank line, then the checkpoint note.
func Body(oldSize uint64, proof []verify.Hash, signedNote []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "old %d\n", oldSize)
	for _, h := range proof {
		b.WriteString(h.String())
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.Write(signedNote)
	return b.Bytes()
}

// AddCheckpoint submits signedNote with the consistency proof from oldSize
// and returns the witness's cosignature line on it (without its newline),
// verified under the configured key. Errors are *ConflictError,
// *RefusedError, ErrNoCosignature, or a transport error.
func (c *Client) AddCheckpoint(ctx context.Context, oldSize uint64, proof []verify.Hash, signedNote []byte) (string, error) {
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: Timeout}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL+"/add-checkpoint", bytes.NewReader(Body(oldSize, proof, signedNote)))
	if err != nil {
		return "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return "", err
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusConflict:
		size, err := strconv.ParseUint(strings.TrimSpace(string(body)), 10, 64)
		if err != nil {
			return "", &RefusedError{Status: resp.StatusCode, Body: "the size answered does not parse: " + short(body)}
		}
		return "", &ConflictError{Size: size}
	default:
		return "", &RefusedError{Status: resp.StatusCode, Body: short(body)}
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "— ") {
			continue
		}
		if c.Witness.VerifyCosignature(signedNote, line) == nil {
			return line, nil
		}
	}
	return "", ErrNoCosignature
}

// short is an answer's text for a message: one line, at most 200 bytes.
func short(b []byte) string {
	s := strings.TrimSpace(string(b))
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
