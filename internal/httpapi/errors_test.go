package httpapi

import (
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/metrics"
)

// Every error code the service declares has its HTTP status in statusOf, and
// no error is built with a code that is not declared: a code without a
// status would answer 500.
func TestEveryCodeHasAStatus(t *testing.T) {
	fset := token.NewFileSet()
	var files []*ast.File
	for _, dir := range []string{"../domain", "../app", "../app/writer", "."} {
		names, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
	}
	declared := 0
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.ValueSpec:
				for i, name := range x.Names {
					if !strings.HasPrefix(strings.ToLower(name.Name), "code") || len(name.Name) < 5 || i >= len(x.Values) {
						continue
					}
					lit, ok := x.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					code, _ := strconv.Unquote(lit.Value)
					declared++
					if _, ok := statusOf[code]; !ok {
						t.Errorf("%s: code %s (%q) has no HTTP status in statusOf", fset.Position(name.Pos()), name.Name, code)
					}
				}
			case *ast.KeyValueExpr:
				if k, ok := x.Key.(*ast.Ident); ok && k.Name == "Code" {
					if lit, ok := x.Value.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						t.Errorf("%s: an error built with the literal code %s: declare it beside its rule and give it a status", fset.Position(lit.Pos()), lit.Value)
					}
				}
			case *ast.CallExpr:
				if sel, ok := x.Fun.(*ast.SelectorExpr); ok && (sel.Sel.Name == "Errorf" || sel.Sel.Name == "NotFound") && len(x.Args) > 0 {
					if id, ok := sel.X.(*ast.Ident); ok && id.Name == "domain" {
						if lit, ok := x.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							t.Errorf("%s: an error built with the literal code %s", fset.Position(lit.Pos()), lit.Value)
						}
					}
				}
			}
			return true
		})
	}
	if declared < 60 {
		t.Fatalf("found %d code constants; the scan has lost its way", declared)
	}
}

// A code outside statusOf is answered 500 and counted under internal_error,
// never under its own value: auditchain_refusals_total's labels stay a fixed
// set.
func TestUndeclaredCodeIsCountedAsInternal(t *testing.T) {
	reg := metrics.NewRegistry()
	reg.RegisterDomain()
	internal := func() float64 {
		return refusalsOf(t, reg.Expose())[domain.CodeInternal]
	}
	before := internal()
	const undeclared = "grant_0f3a9c1e7b2d4a68_missing"
	w := httptest.NewRecorder()
	writeError(w, httptest.NewRequest("GET", "/v1/keys", nil), slog.New(slog.DiscardHandler), &domain.Error{Code: undeclared, Detail: "x"})
	if w.Code != http.StatusInternalServerError {
		t.Errorf("status %d, want 500", w.Code)
	}
	if got := internal() - before; got != 1 {
		t.Errorf("refusals{code=%q} moved by %v, want 1", domain.CodeInternal, got)
	}
	if _, ok := refusalsOf(t, reg.Expose())[undeclared]; ok {
		t.Errorf("auditchain_refusals_total has a series for the undeclared code %q", undeclared)
	}
}

// refusalsOf reads auditchain_refusals_total's series from an exposition, by code.
func refusalsOf(t *testing.T, exposition []byte) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for line := range strings.Lines(string(exposition)) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), `auditchain_refusals_total{code="`)
		if !ok {
			continue
		}
		code, value, ok := strings.Cut(rest, `"} `)
		if !ok {
			t.Fatalf("unexpected sample %q", line)
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("sample %q: %v", line, err)
		}
		out[code] = v
	}
	return out
}
