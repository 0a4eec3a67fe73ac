// Package access says who may do what: the roles an API token holds, the capabilities each role
// grants, and the audit entry every write leaves behind.
package access

import (
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// Role is a named set of capabilities given to an API token.
type Role string

// The roles of auth.api_tokens[].roles.
const (
	OrderService Role = "order_service" // stock, orders, attempts, payments read
	Viewer       Role = "viewer"        // every read but the audit trail and the CSV exports
	Operator     Role = "operator"      // viewer + redeliver, reconcile query now, resolve anomalies
	Finance      Role = "finance"       // viewer + resolve discrepancies, sign off, exports, audit
	Admin        Role = "admin"         // everything
)

// Roles lists every role, in the order the README documents them.
var Roles = []Role{OrderService, Viewer, Operator, Finance, Admin}

// Valid reports whether name is one of Roles.
func Valid(name string) bool { return slices.Contains(Roles, Role(name)) }

// Capability is one kind of call. Routes and commands name the capability they need; roles grant
// capabilities.
type Capability string

// The capabilities. A new route picks one of these, or adds one here and to grants.
const (
	StockWrite           Capability = "stock.write"           // PUT /v1/stock
	OrdersWrite          Capability = "orders.write"          // create orders, record attempts
	OrdersRead           Capability = "orders.read"           // one order, one payment
	Read                 Capability = "read"                  // every other read but audit and exports
	Contract             Capability = "contract.read"         // the OpenAPI document
	AnomaliesResolve     Capability = "anomalies.resolve"     // POST /v1/anomalies/{id}/resolve
	EventsRedeliver      Capability = "events.redeliver"      // POST /v1/events/{id}/redeliver
	ReconcileQuery       Capability = "reconcile.query"       // ask the channel now
	DiscrepanciesResolve Capability = "discrepancies.resolve" // resolve a reconciliation discrepancy
	SignOff              Capability = "reconciliations.signoff"
	Exports              Capability = "exports.read" // the CSV exports
	AuditRead            Capability = "audit.read"   // GET /v1/audit
)

// viewerCaps are what every reading role holds.
var viewerCaps = []Capability{OrdersRead, Read, Contract}

// grants is the one table from roles to capabilities. Admin holds every capability and is not
// listed.
var grants = map[Role][]Capability{
	OrderService: {StockWrite, OrdersWrite, OrdersRead, Contract},
	Viewer:       viewerCaps,
	Operator:     append(slices.Clone(viewerCaps), AnomaliesResolve, EventsRedeliver, ReconcileQuery),
	Finance:      append(slices.Clone(viewerCaps), DiscrepanciesResolve, SignOff, Exports, AuditRead),
}

// Grants reports whether role r holds capability c.
func Grants(r Role, c Capability) bool {
	return r == Admin || slices.Contains(grants[r], c)
}

// Granting returns the first of roles that holds c, and whether one does.
func Granting(roles []Role, c Capability) (Role, bool) {
	for _, r := range roles {
		if Grants(r, c) {
			return r, true
		}
	}
	return "", false
}

// Needed lists the roles that hold c, admin last.
func Needed(c Capability) []Role {
	var out []Role
	for _, r := range Roles {
		if Grants(r, c) {
			out = append(out, r)
		}
	}
	return out
}

// Names joins roles for a message: "operator or admin".
func Names(roles []Role) string {
	s := make([]string, len(roles))
	for i, r := range roles {
		s[i] = string(r)
	}
	return strings.Join(s, " or ")
}

// Entry is one row of the audit trail: who did what to which target, under which role, for
// which request; Before and After are JSON documents where the change has a state to show
// (nil where it has none).
type Entry struct {
	ID        int64           `json:"id"`
	At        time.Time       `json:"at"`
	Actor     string          `json:"actor"` // the token's name, or cli:<OS user>
	Role      Role            `json:"role"`
	Action    string          `json:"action"`
	Target    string          `json:"target"`
	RequestID string          `json:"request_id"`
	Before    json.RawMessage `json:"before,omitempty"`
	After     json.RawMessage `json:"after,omitempty"`
}

// State renders v as an Entry's Before or After; nil stays nil.
func State(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil // the states audited are plain values: this does not happen
	}
	return b
}
