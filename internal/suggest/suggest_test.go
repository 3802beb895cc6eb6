package suggest

import "testing"

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "abc", 3},
		{"abc", "", 3},
		{"tip", "tip", 0},
		{"tpi", "tip", 1},        // one swap of neighbours
		{"chian", "chain", 1},    // one swap of neighbours
		{"kitten", "sitting", 3}, // two substitutions and an insertion
		{"expires", "expiry", 2},
		{"ca", "abc", 3}, // the restricted form: no edit of a swapped pair
	} {
		if got := Distance(tc.a, tc.b); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := Distance(tc.b, tc.a); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d (symmetric)", tc.b, tc.a, got, tc.want)
		}
	}
}

func TestClosest(t *testing.T) {
	verbs := []string{"tip", "verify", "proof", "export", "public-key"}
	for _, tc := range []struct {
		word       string
		candidates []string
		want       string
	}{
		{"tpi", verbs, "tip"},
		{"verfy", verbs, "verify"},
		{"ver", verbs, "verify"},    // the only candidate it begins
		{"p", verbs, ""},            // begins two: no guess
		{"EXPORT", verbs, "export"}, // case folded
		{"nope", verbs, ""},         // nothing near
		{"xyz", verbs, ""},          // short words get one edit only
		{"claude", []string{"claude-code", "codex", "gemini", "cursor"}, "claude-code"},
		{"expires", []string{"expires-in", "expires-at"}, ""}, // begins both, near neither
		{"form", []string{"from", "to"}, "from"},
		{"", verbs, ""},
		{"tip", nil, ""},
	} {
		if got := Closest(tc.word, tc.candidates); got != tc.want {
			t.Errorf("Closest(%q, %q) = %q, want %q", tc.word, tc.candidates, got, tc.want)
		}
	}
}
