package reconcile

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/metrics"
)

// The classes metrics exports for paygw_reconcile_discrepancies (and the alert checks read) are
// this package's Class* constants, read from its source, but the two that are only counted.
func TestDiscrepancyClassesAreTheClasses(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var classes []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			v, ok := n.(*ast.ValueSpec)
			if !ok || len(v.Names) != 1 || !strings.HasPrefix(v.Names[0].Name, "Class") || len(v.Values) != 1 {
				return true
			}
			if lit, ok := v.Values[0].(*ast.BasicLit); ok {
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				if s != ClassMatched && s != ClassRefundMatched {
					classes = append(classes, s)
				}
			}
			return true
		})
	}
	if len(classes) < 10 {
		t.Fatalf("read only %d Class constants", len(classes))
	}
	slices.Sort(classes)
	if got := slices.Sorted(slices.Values(metrics.DiscrepancyClasses)); !slices.Equal(got, classes) {
		t.Fatalf("metrics.DiscrepancyClasses %v, the package's classes %v", got, classes)
	}
}

// The answers metrics starts paygw_reconcile_query_total with are the ones a run counts.
func TestReconcileAnswersAreTheAnswers(t *testing.T) {
	want := []string{string(channels.TradePaid), string(channels.TradeRefunded), string(channels.TradeClosed),
		string(channels.TradeNotPaid), answerFailed, answerUnverified}
	slices.Sort(want)
	if got := slices.Sorted(slices.Values(metrics.ReconcileAnswers)); !slices.Equal(got, want) {
		t.Fatalf("metrics.ReconcileAnswers %v, want %v", got, want)
	}
}
