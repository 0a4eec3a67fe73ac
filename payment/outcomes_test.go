package payment

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"testing"
)

// Outcomes() is every Outcome constant declared in this package, read from the source, so an
// outcome added without it cannot escape the metrics and alert checks that use the list.
func TestOutcomesListsEveryConstant(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "payment.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var declared []Outcome
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			v := spec.(*ast.ValueSpec)
			if id, ok := v.Type.(*ast.Ident); !ok || id.Name != "Outcome" {
				continue
			}
			for _, val := range v.Values {
				s, err := strconv.Unquote(val.(*ast.BasicLit).Value)
				if err != nil {
					t.Fatal(err)
				}
				declared = append(declared, Outcome(s))
			}
		}
	}
	if len(declared) < 12 {
		t.Fatalf("read only %d Outcome constants from payment.go", len(declared))
	}
	if !slices.Equal(declared, Outcomes()) {
		t.Fatalf("Outcomes() = %v, declared %v", Outcomes(), declared)
	}
}
