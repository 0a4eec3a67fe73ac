package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/paygw/paygw/metrics"
)

// exported is every family a serving paygw registers: New's, and the dependencies serve pings.
func exported(t *testing.T) *metrics.Metrics {
	t.Helper()
	m := metrics.New("test")
	for _, dep := range []string{"mysql", "redis"} { // serve's met.Up calls
		m.Up(dep, nil)
	}
	return m
}

// Labels every series has from the scrape, whatever paygw exports.
var targetLabels = []string{"job", "instance"}

// family resolves a series name to its family and the labels the series may carry: a
// histogram's _bucket series adds le.
func family(m *metrics.Metrics, series string) (string, []string, bool) {
	if slices.Contains(m.Names(), series) {
		return series, append(m.Labels(series), targetLabels...), true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(series, suffix)
		if ok && slices.Contains(m.Names(), base) {
			labels := append(m.Labels(base), targetLabels...)
			if suffix == "_bucket" {
				labels = append(labels, "le")
			}
			return base, labels, true
		}
	}
	return "", nil, false
}

var (
	selectorRE = regexp.MustCompile(`\b(paygw_[a-zA-Z0-9_]+)\b(\s*\{([^}]*)\})?`)
	matcherRE  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"`)
	groupingRE = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
	literalsRE = regexp.MustCompile(`^[A-Za-z0-9_]+(\|[A-Za-z0-9_]+)*$`)
)

// checkValue reports what is wrong with a matcher's value for a label whose values are the
// closed set allowed: an equality names a value paygw never sends, a regular expression of
// literal alternatives names one, or any other expression matches none.
func checkValue(op, value string, allowed []string) string {
	if allowed == nil {
		return ""
	}
	if op == "=" || op == "!=" {
		if !slices.Contains(allowed, value) {
			return "never exported (exported: " + strings.Join(allowed, ", ") + ")"
		}
		return ""
	}
	if literalsRE.MatchString(value) {
		for _, v := range strings.Split(value, "|") {
			if !slices.Contains(allowed, v) {
				return v + " never exported (exported: " + strings.Join(allowed, ", ") + ")"
			}
		}
		return ""
	}
	re, err := regexp.Compile("^(?:" + value + ")$")
	if err != nil {
		return err.Error()
	}
	if !slices.ContainsFunc(allowed, re.MatchString) {
		return "matches no exported value"
	}
	return ""
}

// problems checks a PromQL expression: every paygw series it names is exported, every label it
// matches or groups by is one of those series' labels, and every value it matches is one paygw
// exports. It returns the families the expression reads and what is wrong.
func problems(m *metrics.Metrics, expr string) (fams, errs []string) {
	labels := slices.Clone(targetLabels)
	for _, sel := range selectorRE.FindAllStringSubmatch(expr, -1) {
		fam, allowed, ok := family(m, sel[1])
		if !ok {
			errs = append(errs, sel[1]+" is not a metric paygw exports")
			continue
		}
		fams = append(fams, fam)
		labels = append(labels, allowed...)
		for _, mt := range matcherRE.FindAllStringSubmatch(sel[3], -1) {
			if !slices.Contains(allowed, mt[1]) {
				errs = append(errs, fmt.Sprintf("%s has no label %s (labels: %s)", fam, mt[1], strings.Join(allowed, ", ")))
				continue
			}
			if msg := checkValue(mt[2], mt[3], metrics.Values(fam, mt[1])); msg != "" {
				errs = append(errs, fmt.Sprintf("%s{%s%s%q}: %s", fam, mt[1], mt[2], mt[3], msg))
			}
		}
	}
	for _, g := range groupingRE.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(g[2], ",") {
			if l = strings.TrimSpace(l); l != "" && !slices.Contains(labels, l) {
				errs = append(errs, fmt.Sprintf("%s (%s): no series of the expression has label %s", g[1], g[2], l))
			}
		}
	}
	return fams, errs
}

// checkExpr reports problems as errors of t and returns the families expr reads.
func checkExpr(t *testing.T, m *metrics.Metrics, where, expr string) []string {
	t.Helper()
	fams, errs := problems(m, expr)
	for _, e := range errs {
		t.Errorf("%s: %s", where, e)
	}
	return fams
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

type ruleTests struct {
	Tests []struct {
		Name        string `yaml:"name"`
		InputSeries []struct {
			Series string `yaml:"series"`
		} `yaml:"input_series"`
		AlertRuleTest []struct {
			Alertname string `yaml:"alertname"`
			ExpAlerts []struct {
				ExpLabels map[string]string `yaml:"exp_labels"`
			} `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// rules reads alerts.yml: each alert's expression by its name.
func rules(t *testing.T) (ruleFile, map[string]string) {
	t.Helper()
	var f ruleFile
	readYAML(t, filepath.Join("prometheus", "alerts.yml"), &f)
	exprs := map[string]string{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			exprs[r.Alert] = r.Expr
		}
	}
	if len(exprs) < 8 {
		t.Fatalf("read only %d alerts from alerts.yml", len(exprs))
	}
	return f, exprs
}

// Every series, label and value the alert rules read is one paygw exports: a rule matching a
// value paygw never sends (outcome!="probe" while it sends PROBE) can never fire as written.
func TestAlertRulesUseExportedLabels(t *testing.T) {
	m := exported(t)
	_, exprs := rules(t)
	for alert, expr := range exprs {
		checkExpr(t, m, "alerts.yml "+alert, expr)
	}
}

// The rule tests feed series paygw really exports, and expect labels paygw really sends:
// otherwise promtool passes on series that never exist.
func TestAlertRuleTestsUseExportedLabels(t *testing.T) {
	m := exported(t)
	_, exprs := rules(t)
	var f ruleTests
	readYAML(t, filepath.Join("prometheus", "alerts_test.yml"), &f)
	if len(f.Tests) == 0 {
		t.Fatal("no tests in alerts_test.yml")
	}
	seriesRE := regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\}$`)
	for _, tc := range f.Tests {
		for _, in := range tc.InputSeries {
			s := seriesRE.FindStringSubmatch(in.Series)
			if s == nil {
				t.Errorf("%s: series %q unreadable", tc.Name, in.Series)
				continue
			}
			if _, _, ok := family(m, s[1]); !ok {
				t.Errorf("%s: %s is not a metric paygw exports", tc.Name, s[1])
			}
			if len(matcherRE.FindAllString(s[2], -1)) != strings.Count(s[2], "=") {
				t.Errorf("%s: series %q: labels unreadable", tc.Name, in.Series)
			}
			checkExpr(t, m, tc.Name, in.Series)
		}
		for _, at := range tc.AlertRuleTest {
			expr, ok := exprs[at.Alertname]
			if !ok {
				t.Errorf("%s: no alert %s in alerts.yml", tc.Name, at.Alertname)
				continue
			}
			fams := checkExpr(t, m, at.Alertname, expr)
			for _, a := range at.ExpAlerts {
				for label, value := range a.ExpLabels {
					for _, fam := range fams {
						if msg := checkValue("=", value, metrics.Values(fam, label)); msg != "" {
							t.Errorf("%s: expected %s=%q: %s", tc.Name, label, value, msg)
						}
					}
				}
			}
		}
	}
}

// Every query of the committed dashboard reads series, labels and values paygw exports.
func TestDashboardUsesExportedLabels(t *testing.T) {
	m := exported(t)
	b, err := os.ReadFile(filepath.Join("grafana", "paygw.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			checkExpr(t, m, "panel "+p.Title, tg.Expr)
			n++
		}
	}
	if n < 20 {
		t.Fatalf("read only %d queries from the dashboard", n)
	}
}

// The checks catch what they are for, and pass a correct expression.
func TestProblemsCatchDrift(t *testing.T) {
	m := exported(t)
	for name, expr := range map[string]string{
		"lowercase probe":  `rate(paygw_notifications_total{outcome!="probe"}[5m])`,
		"unknown outcome":  `paygw_notifications_total{outcome=~"RETRY|RETRIED"}`,
		"no such label":    `paygw_guard_total{kind="x"}`,
		"no such metric":   `paygw_reconcile_runs_total`,
		"grouped by ghost": `sum by (exported_job) (paygw_guard_total)`,
		"regex matches no": `paygw_guard_total{result=~"redis.*up"}`,
	} {
		if _, errs := problems(m, expr); len(errs) == 0 {
			t.Errorf("%s: %s passed the check", name, expr)
		}
	}
	ok := `sum by (channel, le) (rate(paygw_notification_duration_seconds_bucket{channel=~".+"}[5m])) / on (channel) ` +
		`sum by (channel) (rate(paygw_notifications_total{outcome!="PROBE",outcome=~"RE.*"}[5m]))`
	if _, errs := problems(m, ok); len(errs) > 0 {
		t.Errorf("a correct expression failed: %v", errs)
	}
}
