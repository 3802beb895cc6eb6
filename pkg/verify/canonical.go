package verify

// RFC 8785 helpers for callers that build canonical JSON around values they
// already hold in canonical form (the service's dedup keys, clients' hashes).

// AppendJCSString appends s as an RFC 8785 string. It reports false, having
// appended nothing useful, for invalid UTF-8 (which RFC 8785 cannot carry).
func AppendJCSString(b []byte, s string) ([]byte, bool) { return appendJCSString(b, s) }

// CanonicalMember returns the value of the member key of the object b when b
// is certainly RFC 8785 canonical (isCanonicalJSON: jcs.Transform would leave
// it unchanged); that value is then in
// canonical form too. known is false when b is not known to be canonical (the
// caller must decide some other way); present is false when b is canonical
// but not an object or has no such member.
func CanonicalMember(b []byte, key string) (value []byte, present, known bool) {
	if !isCanonicalJSON(b) {
		return nil, false, false
	}
	if len(b) < 2 || b[0] != '{' || b[1] == '}' {
		return nil, false, true
	}
	// Canonical: no whitespace, keys are escape-free ASCII (isCanonicalJSON),
	// each followed by ':' and a value, members separated by ','.
	i := 1
	for i < len(b) {
		end, _ := canonKey(b, i)
		name := b[i+1 : end-1]
		next, _ := canonValue(b, end+1, 1)
		if string(name) == key {
			return b[end+1 : next], true, true
		}
		if b[next] == '}' {
			break
		}
		i = next + 1
	}
	return nil, false, true
}
