package bench

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strconv"
)

// rawPoolSize distinct raw payloads are built (and signed) once per workload;
// events cycle through them, so nothing is signed or formatted in the hot loop.
const rawPoolSize = 1024

// rawPool holds canonical (RFC 8785) raw objects and, when signed, their
// standard-base64 Ed25519 signatures.
type rawPool struct {
	raws [][]byte
	sigs [][]byte
}

// benchTools rotate through prefilled events so searches have something to filter.
var benchTools = [...]string{"bash", "read_file", "grep"}
var benchDecisions = [...]string{"allow", "deny", "ask"}

func newRawPool(priv ed25519.PrivateKey) *rawPool {
	p := &rawPool{raws: make([][]byte, rawPoolSize)}
	if priv != nil {
		p.sigs = make([][]byte, rawPoolSize)
	}
	for i := range p.raws {
		sum := sha256.Sum256(strconv.AppendInt([]byte("bench-input-"), int64(i), 10))
		// Keys sorted, no whitespace, ASCII only: this is already the JCS form.
		raw := []byte(`{"tool_input":{"cmd_sha256":"`)
		raw = hex.AppendEncode(raw, sum[:])
		raw = append(raw, `"}}`...)
		p.raws[i] = raw
		if priv != nil {
			p.sigs[i] = base64.StdEncoding.AppendEncode(nil, ed25519.Sign(priv, raw))
		}
	}
	return p
}

// eventSpec is one event as the generator sends it.
type eventSpec struct {
	id       []byte // full event_id, "evt-…"
	seq      int64
	prevHash []byte // "sha256:<hex>", nil for null
	raw      []byte
	tool     string
	decision string
	machine  string // "" for null
	sig      []byte // nil for null
	ts       string // "" for null (the server sets it on single appends)
}

// appendCanonical appends the event exactly as verify.CanonicalEvent encodes
// it: every hashed field, keys in RFC 8785 order, nulls kept. It is a valid
// request row too, so a batch row's payload_hash is SHA-256 of these bytes.
// Every string here is plain ASCII needing no escapes (ids, hex, base64, ts).
func appendCanonical(b []byte, e *eventSpec) []byte {
	b = append(b, `{"decision":"`...)
	b = append(b, e.decision...)
	b = append(b, `","event_id":"`...)
	b = append(b, e.id...)
	b = append(b, `","event_type":"tool_call","machine_id":`...)
	b = appendStrOrNull(b, e.machine)
	b = append(b, `,"parent_id":null,"prev_hash":`...)
	b = appendBytesOrNull(b, e.prevHash)
	b = append(b, `,"raw":`...)
	b = append(b, e.raw...)
	b = append(b, `,"sequence":`...)
	b = strconv.AppendInt(b, e.seq, 10)
	b = append(b, `,"signature":`...)
	b = appendBytesOrNull(b, e.sig)
	b = append(b, `,"signature_key":null,"tool":"`...)
	b = append(b, e.tool...)
	b = append(b, `","ts":`...)
	b = appendStrOrNull(b, e.ts)
	return append(b, '}')
}

// appendHashOf appends "sha256:<hex>" of canonical bytes.
func appendHashOf(b, canonical []byte) []byte {
	sum := sha256.Sum256(canonical)
	b = append(b, "sha256:"...)
	return hex.AppendEncode(b, sum[:])
}

func appendStrOrNull(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

func appendBytesOrNull(b []byte, s []byte) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendEventID appends "evt-<prefix>-<a>-<n>".
func appendEventID(b []byte, prefix string, a int, n int64) []byte {
	b = append(b, "evt-"...)
	b = append(b, prefix...)
	b = append(b, '-')
	b = strconv.AppendInt(b, int64(a), 10)
	b = append(b, '-')
	return strconv.AppendInt(b, n, 10)
}
