package dashboard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/paygw/paygw/metrics"
)

var committed = filepath.Join("..", "..", "deploy", "grafana", "paygw.json")

// The committed dashboard is exactly what Build renders: run `go generate ./internal/dashboard`
// after changing the panels.
func TestCommittedJSONIsGenerated(t *testing.T) {
	want, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(committed)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from dashboard.Build() (%d vs %d bytes): run go generate ./internal/dashboard", committed, len(got), len(want))
	}
}

func TestBuildIsDeterministic(t *testing.T) {
	a, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	b, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("two Build() calls differ")
	}
}

type model struct {
	UID    string `json:"uid"`
	Panels []struct {
		ID         uint32 `json:"id"`
		Type       string `json:"type"`
		Title      string `json:"title"`
		Datasource *struct {
			Type string `json:"type"`
			UID  string `json:"uid"`
		} `json:"datasource"`
		Targets []struct {
			Expr  string `json:"expr"`
			RefID string `json:"refId"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

// Queries() is what the JSON's panels query, in order, and every panel queries Prometheus
// through the datasource variable.
func TestQueriesAreThePanelsQueries(t *testing.T) {
	out, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	var m model
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	if m.UID != UID {
		t.Errorf("uid %q", m.UID)
	}
	var exprs []string
	rowsSeen := 0
	ids := map[uint32]bool{}
	for _, p := range m.Panels {
		if p.ID == 0 || ids[p.ID] {
			t.Errorf("panel %q: id %d missing or repeated", p.Title, p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			rowsSeen++
			continue
		}
		if p.Datasource == nil || p.Datasource.Type != "prometheus" || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource %+v", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if tg.RefID == "" {
				t.Errorf("panel %q: a query without refId", p.Title)
			}
			exprs = append(exprs, tg.Expr)
		}
	}
	if rowsSeen != len(rows) {
		t.Errorf("%d rows in the JSON, %d defined", rowsSeen, len(rows))
	}
	if !reflect.DeepEqual(exprs, Queries()) {
		t.Fatalf("panel queries\n%q\n!= Queries()\n%q", exprs, Queries())
	}
	found := false
	for _, v := range m.Templating.List {
		if v.Name == "datasource" && v.Type == "datasource" && v.Query == "prometheus" {
			found = true
		}
	}
	if !found {
		t.Errorf("no prometheus datasource variable in %+v", m.Templating.List)
	}
}

// Every metric the gateway exports is on a panel: the list is the registry's (metrics.Names), with
// the dependencies serve pings, so a metric added to the code without a panel fails here.
func TestEveryMetricIsShown(t *testing.T) {
	m := metrics.New("test")
	for _, dep := range []string{"mysql", "redis"} { // serve's met.Up calls
		m.Up(dep, nil)
	}
	names := m.Names()
	if len(names) < 20 {
		t.Fatalf("the registry names only %d families: %v", len(names), names)
	}
	queried := regexp.MustCompile(`\bpaygw_[a-z0-9_]+`).FindAllString(strings.Join(Queries(), "\n"), -1)
	for _, name := range names {
		shown := slices.ContainsFunc(queried, func(q string) bool {
			return q == name || q == name+"_bucket" || q == name+"_sum" || q == name+"_count"
		})
		if !shown {
			t.Errorf("no panel queries %s", name)
		}
	}
}

// The queries are balanced and use only the Grafana variables a direct Prometheus query can
// have replaced (RateInterval and $__range).
func TestQueriesShape(t *testing.T) {
	for _, q := range Queries() {
		if strings.Count(q, "(") != strings.Count(q, ")") || strings.Count(q, "[") != strings.Count(q, "]") ||
			strings.Count(q, "{") != strings.Count(q, "}") {
			t.Errorf("unbalanced: %s", q)
		}
		rest := strings.NewReplacer(RateInterval, "", "$__range", "").Replace(q)
		if strings.Contains(rest, "$") {
			t.Errorf("unexpected variable in %s", q)
		}
	}
}

// promtool (Debian's prometheus package; scripts/promtool.sh installs it) parses every query as
// the expression of a recording rule, with the Grafana variables replaced by ranges.
func TestQueriesParseWithPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is not installed: run scripts/promtool.sh (make test does, before the Go tests)")
	}
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	vars := strings.NewReplacer(RateInterval, "5m", "$__range", "1h")
	for i, q := range Queries() {
		expr, err := json.Marshal(vars.Replace(q)) // a JSON string is a YAML string
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "      - record: paygw:dashboard_query_%d\n        expr: %s\n", i, expr)
	}
	file := filepath.Join(t.TempDir(), "queries.yml")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "check", "rules", file).CombinedOutput() // #nosec G204 -- promtool from PATH on a file of this test
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	if want := fmt.Sprintf("SUCCESS: %d rules found", len(Queries())); !strings.Contains(string(out), want) {
		t.Fatalf("promtool: %s (want %q)", out, want)
	}
}
