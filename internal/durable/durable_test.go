package durable_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/auditchain/auditchain/internal/durable"
)

func TestWriteFileRefusesAnExistingFileUnlessReplacing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pin.json")
	if err := durable.WriteFile(path, []byte("first"), false); err != nil {
		t.Fatal(err)
	}
	if err := durable.WriteFile(path, []byte("second"), false); !errors.Is(err, durable.ErrExists) {
		t.Fatalf("second write without replace: %v, want ErrExists", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "first" {
		t.Fatalf("a refused write changed the file: %q", got)
	}
	if err := durable.WriteFile(path, []byte("third"), true); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "third" {
		t.Fatalf("replace: file holds %q", got)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("temporary files left beside the file: %v", names)
	}
}
