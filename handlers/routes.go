package handlers

import "github.com/paygw/paygw/access"

// routeCaps is the one table from a /v1 route (method and echo's pattern) to the capability a
// token's roles must hold to call it. A route added to Echo without a line here is refused to
// every token, and TestEveryRouteHasARole fails.
var routeCaps = map[string]access.Capability{
	"PUT /v1/stock/:sku":                              access.StockWrite,
	"POST /v1/orders":                                 access.OrdersWrite,
	"POST /v1/orders/:trade_no/attempts":              access.OrdersWrite,
	"GET /v1/orders":                                  access.Read, // the search: any user's orders
	"GET /v1/orders/:trade_no":                        access.OrdersRead,
	"GET /v1/payments/:trade_no":                      access.OrdersRead,
	"GET /v1/reconciliations":                         access.Read,
	"GET /v1/reconciliations/:id/discrepancies":       access.Read,
	"GET /v1/reconciliations/:id/discrepancies.csv":   access.Exports,
	"POST /v1/reconciliations/:channel/:date/signoff": access.SignOff,
	"POST /v1/discrepancies/:id/resolve":              access.DiscrepanciesResolve,
	"GET /v1/anomalies":                               access.Read,
	"GET /v1/anomalies.csv":                           access.Exports,
	"POST /v1/anomalies/:id/resolve":                  access.AnomaliesResolve,
	"GET /v1/events":                                  access.Read,
	"GET /v1/webhooks/deliveries":                     access.Read,
	"POST /v1/events/:id/redeliver":                   access.EventsRedeliver,
	"GET /v1/audit":                                   access.AuditRead,
	"GET /v1/openapi.yaml":                            access.Contract,
}
