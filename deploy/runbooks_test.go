package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// runbookBase is where docs/runbooks.md is read on the web; runbook_url anchors point into it.
const runbookBase = "https://github.com/paygw/paygw/blob/main/docs/runbooks.md#"

// anchor is GitHub's anchor of a Markdown heading: lower case, spaces to dashes, punctuation
// other than - and _ dropped.
func anchor(heading string) string {
	h := strings.ToLower(strings.TrimSpace(heading))
	h = regexp.MustCompile(`[^a-z0-9 _-]`).ReplaceAllString(h, "")
	return strings.ReplaceAll(h, " ", "-")
}

// Every alert carries a runbook_url pointing at a section of docs/runbooks.md that exists, and
// every section there is an alert's.
func TestEveryAlertHasARunbook(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "runbooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^## (.+)$`).FindAllStringSubmatch(string(doc), -1) {
		sections[anchor(m[1])] = true
	}
	f, _ := rules(t)
	used := map[string]bool{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			url := r.Annotations["runbook_url"]
			a, ok := strings.CutPrefix(url, runbookBase)
			switch {
			case url == "":
				t.Errorf("%s has no runbook_url", r.Alert)
			case !ok:
				t.Errorf("%s: runbook_url %q is not in %s", r.Alert, url, runbookBase)
			case !sections[a]:
				t.Errorf("%s: runbook_url %q: docs/runbooks.md has no section #%s", r.Alert, url, a)
			case a != anchor(r.Alert):
				t.Errorf("%s: runbook_url %q points at another alert's section", r.Alert, url)
			}
			used[a] = true
		}
	}
	for s := range sections {
		if !used[s] {
			t.Errorf("docs/runbooks.md section #%s belongs to no alert", s)
		}
	}
}
