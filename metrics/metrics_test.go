package metrics

import (
	"slices"
	"testing"
)

// Names lists the registry's paygw families with their labels, and every closed label set
// Values gives belongs to a registered family's real label: a typo in either table fails here,
// not silently in the alert checks that read them.
func TestNamesLabelsValues(t *testing.T) {
	m := New("test")
	names := m.Names()
	for _, want := range []string{"paygw_notifications_total", "paygw_apply_group_size", "paygw_anomalies_open",
		"paygw_reconcile_discrepancies", "paygw_reconcile_last_success_timestamp_seconds", "paygw_stored_state_up"} {
		if !slices.Contains(names, want) {
			t.Errorf("Names() lacks %s: %v", want, names)
		}
	}
	if got := m.Labels("paygw_reconcile_last_success_timestamp_seconds"); !slices.Equal(got, []string{"recon_job", "channel"}) {
		t.Errorf("last success labels %v: job would collide with the scrape's own", got)
	}
	m.Up("redis", nil)
	if !slices.Contains(m.Names(), "paygw_redis_up") {
		t.Error("Up's family is not in Names()")
	}
	closed := 0
	for _, name := range m.Names() {
		for _, label := range m.Labels(name) {
			if vs := Values(name, label); vs != nil {
				closed++
				if slices.Contains(vs, "") {
					t.Errorf("%s{%s}: an empty value in %v", name, label, vs)
				}
			}
		}
	}
	if closed != 10 { // outcome, two reasons, three results, answer, class, recon_job, kind
		t.Errorf("%d closed label sets found through Names and Labels, want 10: Values names a family or label that is not registered", closed)
	}
	outcomes := Outcomes()
	for _, o := range []string{OutcomeProbe, OutcomeRetry, OutcomeRefused, "APPLIED", "UNKNOWN_ORDER"} {
		if !slices.Contains(outcomes, o) {
			t.Errorf("Outcomes() lacks %s", o)
		}
	}
}
