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
	var declared []Outcome
	for _, d := range DeclaredOutcomes(t) {
		declared = append(declared, d.Value)
	}
	if len(declared) < 12 {
		t.Fatalf("read only %d Outcome constants from payment.go", len(declared))
	}
	if !slices.Equal(declared, Outcomes()) {
		t.Fatalf("Outcomes() = %v, declared %v", Outcomes(), declared)
	}
}

// DeclaredOutcome is an Outcome constant as payment.go declares it.
type DeclaredOutcome struct {
	Name  string
	Value Outcome
}

// DeclaredOutcomes reads payment.go's Outcome constants, in their order, from the source: what
// the outcome lists and tables are checked against. Exported for the payment_test package.
func DeclaredOutcomes(tb testing.TB) []DeclaredOutcome {
	tb.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "payment.go", nil, 0)
	if err != nil {
		tb.Fatal(err)
	}
	var out []DeclaredOutcome
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
			if len(v.Values) != len(v.Names) {
				tb.Fatalf("payment.go: Outcome constants %v without a value each", v.Names)
			}
			for i, name := range v.Names {
				s, err := strconv.Unquote(v.Values[i].(*ast.BasicLit).Value)
				if err != nil {
					tb.Fatal(err)
				}
				out = append(out, DeclaredOutcome{Name: name.Name, Value: Outcome(s)})
			}
		}
	}
	return out
}
