// Package suggest names what a person most likely meant by a word nobody
// knows: a JSON key (internal/httpapi), a flag, a command or a host
// (cmd/auditchain). One notion of "near" serves them all, so every surface
// makes the same guesses.
package suggest

import (
	"slices"
	"strings"
)

// Distance is the edit distance of a and b (bytes): insertions, deletions,
// substitutions and swaps of two neighbouring bytes each count one (the
// optimal string alignment distance), so "tpi" is one edit from "tip".
func Distance(a, b string) int {
	// Three rows: the swap looks two rows back.
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// Closest is the candidate word most likely stands for, or "" when none is
// near enough to be worth naming: the one candidate word is a prefix of
// ("ver" for "verify"), else the nearest by Distance, case folded, within
// one edit for words of up to four bytes and two for longer ones (a guess
// further off misleads more than it helps). Ties go to the candidate first
// in sorted order, so the answer does not depend on the candidates' order.
func Closest(word string, candidates []string) string {
	w := strings.ToLower(word)
	if w == "" {
		return ""
	}
	sorted := slices.Sorted(slices.Values(candidates))
	var prefixed []string
	for _, c := range sorted {
		if strings.HasPrefix(strings.ToLower(c), w) {
			prefixed = append(prefixed, c)
		}
	}
	if len(prefixed) == 1 {
		return prefixed[0]
	}
	limit := 2
	if len(w) <= 4 {
		limit = 1
	}
	best, bestDist := "", limit+1
	for _, c := range sorted {
		if d := Distance(w, strings.ToLower(c)); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}
