package access

import (
	"slices"
	"testing"
)

// TestGrants: the roles hold what the README's table says, and nothing more.
func TestGrants(t *testing.T) {
	all := []Capability{StockWrite, OrdersWrite, OrdersRead, Read, Contract, AnomaliesResolve, EventsRedeliver,
		ReconcileQuery, DiscrepanciesResolve, SignOff, Exports, AuditRead}
	want := map[Role][]Capability{
		OrderService: {StockWrite, OrdersWrite, OrdersRead, Contract},
		Viewer:       {OrdersRead, Read, Contract},
		Operator:     {OrdersRead, Read, Contract, AnomaliesResolve, EventsRedeliver, ReconcileQuery},
		Finance:      {OrdersRead, Read, Contract, DiscrepanciesResolve, SignOff, Exports, AuditRead},
		Admin:        all,
	}
	for _, r := range Roles {
		for _, c := range all {
			if got := Grants(r, c); got != slices.Contains(want[r], c) {
				t.Errorf("Grants(%s, %s) = %v", r, c, got)
			}
		}
	}
	if got := Needed(AuditRead); !slices.Equal(got, []Role{Finance, Admin}) {
		t.Errorf("Needed(audit.read) = %v", got)
	}
	if r, ok := Granting([]Role{Viewer, Operator}, EventsRedeliver); !ok || r != Operator {
		t.Errorf("Granting(viewer, operator; redeliver) = %s, %v", r, ok)
	}
	if _, ok := Granting([]Role{Viewer}, StockWrite); ok || Valid("root") || !Valid("finance") {
		t.Error("a viewer writes stock, or root is a role, or finance is not")
	}
}
