package hook

import (
	"fmt"
	"io"
	"strings"
)

// WriteDiff prints c as a unified diff with two lines of context: what
// `hook install --dry-run` shows of each file it would touch.
func WriteDiff(w io.Writer, c Change) {
	from, to := c.Path, c.Path
	if c.Before == nil {
		from = "/dev/null"
	}
	if c.After == nil {
		to = "/dev/null"
	}
	fmt.Fprintf(w, "--- %s\n+++ %s\n", from, to)
	a, b := diffLines(c.Before), diffLines(c.After)
	ops := lineDiff(a, b)
	const context = 2
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		start := max(i-context, 0)
		end := i
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*context {
				break
			}
			end = run
		}
		end = min(end+context, len(ops))
		na, nb := 0, 0
		for _, op := range ops[start:end] {
			if op.kind != '+' {
				na++
			}
			if op.kind != '-' {
				nb++
			}
		}
		fmt.Fprintf(w, "@@ -%s +%s @@\n", hunkRange(ops[start].a, na), hunkRange(ops[start].b, nb))
		for _, op := range ops[start:end] {
			fmt.Fprintf(w, "%c%s\n", op.kind, op.line)
		}
		i = end
	}
}

// hunkRange is a unified diff's "start,count" (an empty range names the
// line before it).
func hunkRange(at, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", at)
	}
	return fmt.Sprintf("%d,%d", at+1, n)
}

func diffLines(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

type diffOp struct {
	kind byte // ' ', '-', '+'
	line string
	a, b int // the line's index in the old and the new text
}

// lineDiff is a shortest edit of a into b by longest common subsequence
// (settings files are short).
func lineDiff(a, b []string) []diffOp {
	n, m := len(a), len(b)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var ops []diffOp
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			ops = append(ops, diffOp{' ', a[i], i, j})
			i, j = i+1, j+1
		case i < n && (j == m || lcs[i+1][j] >= lcs[i][j+1]):
			ops = append(ops, diffOp{'-', a[i], i, j})
			i++
		default:
			ops = append(ops, diffOp{'+', b[j], i, j})
			j++
		}
	}
	return ops
}
