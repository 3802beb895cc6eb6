package hook

import (
	"fmt"
	"strconv"
	"strings"
)

// tomlFile is a TOML document kept as its lines, read well enough to find
// and edit the few tables hook install owns in Codex's config.toml
// ([hooks.state."…"], [projects."…"]) without disturbing anything else: the
// lines it does not touch are written back byte for byte. It is no general
// TOML parser (the module takes no dependency for it): values are read as
// strings, booleans and numbers, in standard tables, dotted keys and inline
// tables, which is how Codex and people write these entries.
type tomlFile struct {
	lines []string
	// values maps a flattened key path (parts joined by tomlSep) to a
	// scalar's text (a string's content, unquoted).
	values map[string]string
	// tables lists the standard table headers: path and line.
	tables []tomlTable
}

type tomlTable struct {
	path []string
	line int
}

const tomlSep = "\x00"

func parseTOML(b []byte) (*tomlFile, error) {
	f := &tomlFile{values: map[string]string{}}
	if len(b) > 0 {
		f.lines = strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	}
	var table []string
	multi := "" // the closing quotes of a multi-line string in progress
	depth := 0  // open brackets of a multi-line array in progress
	for i, raw := range f.lines {
		line := raw
		if multi != "" {
			if j := strings.Index(line, multi); j >= 0 {
				line, multi = line[j+3:], ""
			} else {
				continue
			}
		}
		if depth > 0 {
			depth += bracketDepth(line)
			continue
		}
		s := strings.TrimSpace(stripTOMLComment(line))
		switch {
		case s == "":
			continue
		case strings.HasPrefix(s, "[["):
			inner := strings.TrimSuffix(strings.TrimPrefix(s, "[["), "]]")
			p, _, err := tomlKey(inner)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", i+1, err)
			}
			table = append(p, "[]") // array tables: nothing hook install reads
			continue
		case strings.HasPrefix(s, "["):
			p, rest, err := tomlKey(strings.TrimPrefix(s, "["))
			if err != nil || strings.TrimSpace(rest) != "]" {
				return nil, fmt.Errorf("line %d: a table header hook install cannot read: %s", i+1, s)
			}
			table = p
			f.tables = append(f.tables, tomlTable{path: p, line: i})
			continue
		}
		key, rest, err := tomlKey(s)
		if err != nil || !strings.HasPrefix(strings.TrimSpace(rest), "=") {
			return nil, fmt.Errorf("line %d: a key hook install cannot read: %s", i+1, s)
		}
		val := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest), "="))
		path := append(append([]string{}, table...), key...)
		switch {
		case strings.HasPrefix(val, `"""`) || strings.HasPrefix(val, "'''"):
			q := val[:3]
			if !strings.Contains(val[3:], q) {
				multi = q
			}
		case strings.HasPrefix(val, "["):
			depth = bracketDepth(val)
		case strings.HasPrefix(val, "{"):
			if err := f.inline(path, val); err != nil {
				return nil, fmt.Errorf("line %d: %w", i+1, err)
			}
		default:
			v, _, err := tomlScalar(val)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", i+1, err)
			}
			f.values[strings.Join(path, tomlSep)] = v
		}
	}
	return f, nil
}

// inline flattens an inline table's scalars under path.
func (f *tomlFile) inline(path []string, s string) error {
	s = strings.TrimSpace(strings.TrimPrefix(s, "{"))
	for {
		s = strings.TrimSpace(s)
		if strings.HasPrefix(s, "}") {
			return nil
		}
		key, rest, err := tomlKey(s)
		if err != nil {
			return err
		}
		rest = strings.TrimSpace(rest)
		if !strings.HasPrefix(rest, "=") {
			return fmt.Errorf("an inline table hook install cannot read")
		}
		rest = strings.TrimSpace(rest[1:])
		sub := append(append([]string{}, path...), key...)
		if strings.HasPrefix(rest, "{") {
			end := matchingBrace(rest)
			if end < 0 {
				return fmt.Errorf("an inline table hook install cannot read")
			}
			if err := f.inline(sub, rest[:end+1]); err != nil {
				return err
			}
			rest = rest[end+1:]
		} else {
			v, after, err := tomlScalar(rest)
			if err != nil {
				return err
			}
			f.values[strings.Join(sub, tomlSep)] = v
			rest = after
		}
		rest = strings.TrimSpace(rest)
		rest = strings.TrimPrefix(rest, ",")
		s = rest
		if s == "" {
			return nil
		}
	}
}

func matchingBrace(s string) int {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"', '\'':
			_, rest, err := tomlScalar(s[i:])
			if err != nil {
				return -1
			}
			i = len(s) - len(rest) - 1
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

func bracketDepth(s string) int {
	d := 0
	s = stripTOMLComment(s)
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"', '\'':
			_, rest, err := tomlScalar(s[i:])
			if err != nil {
				return d
			}
			i = len(s) - len(rest) - 1
		case '[':
			d++
		case ']':
			d--
		}
	}
	return d
}

// stripTOMLComment drops a # comment outside strings.
func stripTOMLComment(s string) string {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '#':
			return s[:i]
		case '"', '\'':
			_, rest, err := tomlScalar(s[i:])
			if err != nil {
				return s
			}
			i = len(s) - len(rest) - 1
		}
	}
	return s
}

// tomlKey reads a dotted key at the start of s: its parts and what follows.
func tomlKey(s string) ([]string, string, error) {
	var parts []string
	for {
		s = strings.TrimLeft(s, " \t")
		var part string
		switch {
		case strings.HasPrefix(s, `"`) || strings.HasPrefix(s, "'"):
			v, rest, err := tomlScalar(s)
			if err != nil {
				return nil, "", err
			}
			part, s = v, rest
		default:
			n := strings.IndexFunc(s, func(r rune) bool {
				return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-')
			})
			if n < 0 {
				n = len(s)
			}
			if n == 0 {
				return nil, "", fmt.Errorf("no key at %q", s)
			}
			part, s = s[:n], s[n:]
		}
		parts = append(parts, part)
		t := strings.TrimLeft(s, " \t")
		if !strings.HasPrefix(t, ".") {
			return parts, s, nil
		}
		s = t[1:]
	}
}

// tomlScalar reads one scalar at the start of s (a basic or literal string,
// a boolean, a number or a date as written) and what follows it.
func tomlScalar(s string) (string, string, error) {
	switch {
	case strings.HasPrefix(s, "'"):
		end := strings.IndexByte(s[1:], '\'')
		if end < 0 {
			return "", "", fmt.Errorf("an unterminated string")
		}
		return s[1 : 1+end], s[2+end:], nil
	case strings.HasPrefix(s, `"`):
		var b strings.Builder
		for i := 1; i < len(s); i++ {
			switch c := s[i]; c {
			case '"':
				return b.String(), s[i+1:], nil
			case '\\':
				if i+1 >= len(s) {
					return "", "", fmt.Errorf("an unterminated string")
				}
				i++
				switch s[i] {
				case 'b':
					b.WriteByte('\b')
				case 't':
					b.WriteByte('\t')
				case 'n':
					b.WriteByte('\n')
				case 'f':
					b.WriteByte('\f')
				case 'r':
					b.WriteByte('\r')
				case 'e':
					b.WriteByte(0x1b)
				case '"', '\\':
					b.WriteByte(s[i])
				case 'u', 'U':
					n := 4
					if s[i] == 'U' {
						n = 8
					}
					if i+n >= len(s) {
						return "", "", fmt.Errorf("a bad escape")
					}
					r, err := strconv.ParseUint(s[i+1:i+1+n], 16, 32)
					if err != nil {
						return "", "", fmt.Errorf("a bad escape")
					}
					b.WriteRune(rune(r))
					i += n
				default:
					return "", "", fmt.Errorf("a bad escape")
				}
			default:
				b.WriteByte(c)
			}
		}
		return "", "", fmt.Errorf("an unterminated string")
	}
	n := strings.IndexAny(s, ",}] \t#")
	if n < 0 {
		n = len(s)
	}
	if n == 0 {
		return "", "", fmt.Errorf("no value at %q", s)
	}
	return s[:n], s[n:], nil
}

// tomlQuote is s as a TOML basic string.
func tomlQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// tomlHeader is the header of the standard table at path.
func tomlHeader(path ...string) string {
	parts := make([]string, len(path))
	for i, p := range path {
		if p != "" && strings.IndexFunc(p, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-')
		}) < 0 {
			parts[i] = p
		} else {
			parts[i] = tomlQuote(p)
		}
	}
	return "[" + strings.Join(parts, ".") + "]"
}

// value is the scalar at path, however the document wrote it.
func (f *tomlFile) value(path ...string) (string, bool) {
	v, ok := f.values[strings.Join(path, tomlSep)]
	return v, ok
}

// mentions reports whether any value lies at or under path.
func (f *tomlFile) mentions(path ...string) bool {
	p := strings.Join(path, tomlSep)
	for k := range f.values {
		if k == p || strings.HasPrefix(k, p+tomlSep) {
			return true
		}
	}
	for _, t := range f.tables {
		if strings.Join(t.path, tomlSep) == p {
			return true
		}
	}
	return false
}

// table is the standard table at path: its header line and the line after
// its last (-1 when it has no header of its own).
func (f *tomlFile) table(path ...string) (start, end int) {
	p := strings.Join(path, tomlSep)
	for i, t := range f.tables {
		if strings.Join(t.path, tomlSep) != p {
			continue
		}
		end = len(f.lines)
		if i+1 < len(f.tables) {
			end = f.tables[i+1].line
		}
		// Comments and blank lines just before the next header belong
		// to it.
		for end > t.line+1 {
			s := strings.TrimSpace(f.lines[end-1])
			if s != "" && !strings.HasPrefix(s, "#") {
				break
			}
			end--
		}
		return t.line, end
	}
	return -1, -1
}

// ownsTable reports whether the standard table at path holds nothing but
// the keys named (so that removing it removes nothing else), and whether
// every value under path lies in it (not also in dotted keys or inline
// tables elsewhere, which hook install does not edit).
func (f *tomlFile) ownsTable(path []string, keys ...string) bool {
	start, end := f.table(path...)
	if start < 0 {
		return false
	}
	n := 0
	for _, l := range f.lines[start+1 : end] {
		s := strings.TrimSpace(stripTOMLComment(l))
		if s == "" {
			continue
		}
		k, _, err := tomlKey(s)
		if err != nil || len(k) != 1 || !containsString(keys, k[0]) {
			return false
		}
		n++
	}
	under := 0
	p := strings.Join(path, tomlSep) + tomlSep
	for k := range f.values {
		if strings.HasPrefix(k, p) {
			under++
		}
	}
	return under == n
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// edit is a change to the lines: remove [start, end), insert lines there.
type tomlEdit struct {
	start, end int
	insert     []string
}

// apply makes the edits (on distinct ranges) and appends tail, and returns
// the document's new text.
func (f *tomlFile) apply(edits []tomlEdit, tail []string) []byte {
	var out []string
	at := 0
	sorted := append([]tomlEdit{}, edits...)
	for i := 1; i < len(sorted); i++ {
		for j := i; j > 0 && sorted[j].start < sorted[j-1].start; j-- {
			sorted[j], sorted[j-1] = sorted[j-1], sorted[j]
		}
	}
	for _, e := range sorted {
		out = append(out, f.lines[at:e.start]...)
		out = append(out, e.insert...)
		at = e.end
	}
	out = append(out, f.lines[at:]...)
	for len(out) > 0 && strings.TrimSpace(out[len(out)-1]) == "" {
		out = out[:len(out)-1]
	}
	if len(tail) > 0 {
		if len(out) > 0 {
			out = append(out, "")
		}
		out = append(out, tail...)
	}
	if len(out) == 0 {
		return []byte{}
	}
	return []byte(strings.Join(out, "\n") + "\n")
}
