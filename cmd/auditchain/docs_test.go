package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// outsidePointer matches references to files that exist only beside the
// repository (the steering repo's shared notes and spec), never in a clone.
var outsidePointer = regexp.MustCompile(`\.\./shared|/work/shared|(^|[^/\w.])notes/[\w-]+\.md`)

// Nothing committed points outside the repository: a clone has no such
// files, so the facts live under docs/ in our own words.
func TestNothingPointsOutsideTheRepository(t *testing.T) {
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == ".git" || name == "testdata" || name == "node_modules" || (strings.HasPrefix(name, ".") && name != "." && name != ".." && name != ".ci") {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".md", ".sql", ".yaml", ".yml", ".sh", "":
		default:
			return nil
		}
		if strings.HasSuffix(path, "docs_test.go") {
			return nil // this file spells the patterns out
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.IndexByte(b, 0) >= 0 {
			return nil // a built binary, not text we wrote
		}
		// Every match of outsidePointer holds "/shared" or "notes/": a file
		// with neither (most) has no line to look at.
		if !bytes.Contains(b, []byte("/shared")) && !bytes.Contains(b, []byte("notes/")) {
			return nil
		}
		for i, line := range strings.Split(string(b), "\n") {
			if outsidePointer.MatchString(line) {
				t.Errorf("%s:%d points outside the repository: %s", path, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
