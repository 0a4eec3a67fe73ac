package delivery

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/paygw/paygw/repository"
)

// What the API lists (GET /v1/webhooks/deliveries).
type (
	// Page is one page of deliveries; NextCursor is "" after the last.
	Page struct {
		Deliveries []Delivery `json:"deliveries"`
		NextCursor string     `json:"next_cursor,omitempty"`
	}
	// Delivery is one event to one endpoint.
	Delivery struct {
		EventID       string     `json:"event_id"`
		Type          string     `json:"type"`
		Endpoint      string     `json:"endpoint"`
		Status        string     `json:"status"`
		NextAttemptAt *time.Time `json:"next_attempt_at"` // null unless pending
		Attempts      []Attempt  `json:"attempts"`
	}
	// Attempt is one POST.
	Attempt struct {
		At         time.Time `json:"at"`
		StatusCode int       `json:"status_code"` // 0: no answer (timeout, connection refused)
		LatencyMS  int64     `json:"latency_ms"`
		Error      string    `json:"error"`
	}
)

// Query selects deliveries: Endpoint and Status ("" for any), Cursor from the previous page's
// NextCursor, Limit (1 to MaxLimit; 0 for DefaultLimit).
type Query struct {
	Endpoint string
	Status   string
	Cursor   string
	Limit    int
}

// Page sizes of List.
const (
	DefaultLimit = 50
	MaxLimit     = 500
)

// Errors of a Query a client made.
var (
	ErrBadStatus = errors.New("status is not one of pending, delivered, failed, disabled")
	ErrBadCursor = errors.New("cursor is not one this API gave")
	ErrBadLimit  = errors.New("limit is not between 1 and 500")
)

// Statuses lists the delivery statuses.
var Statuses = []string{repository.DeliveryPending, repository.DeliveryDelivered, repository.DeliveryFailed,
	repository.DeliveryDisabled}

// List answers a page of deliveries, oldest first, each with its attempts.
func (d *Dispatcher) List(ctx context.Context, q Query) (Page, error) {
	if q.Status != "" && !slices.Contains(Statuses, q.Status) {
		return Page{}, ErrBadStatus
	}
	after, err := ParseCursor(q.Cursor)
	if err != nil {
		return Page{}, err
	}
	switch {
	case q.Limit == 0:
		q.Limit = DefaultLimit
	case q.Limit < 0 || q.Limit > MaxLimit:
		return Page{}, ErrBadLimit
	}
	rows, err := d.store.Deliveries(ctx, repository.DeliveryFilter{Endpoint: q.Endpoint, Status: q.Status, After: after, Limit: q.Limit})
	if err != nil {
		return Page{}, err
	}
	page := Page{Deliveries: make([]Delivery, len(rows))}
	for i, r := range rows {
		page.Deliveries[i] = view(r)
	}
	if len(rows) == q.Limit {
		page.NextCursor = strconv.FormatInt(rows[len(rows)-1].ID, 10)
	}
	return page, nil
}

func view(r repository.WebhookDelivery) Delivery {
	v := Delivery{EventID: r.EventID, Type: r.Type, Endpoint: r.Endpoint, Status: r.Status, Attempts: make([]Attempt, len(r.Attempts))}
	if r.NextAttempt.Valid {
		t := r.NextAttempt.Time.UTC()
		v.NextAttemptAt = &t
	}
	for i, a := range r.Attempts {
		v.Attempts[i] = Attempt{At: a.At.UTC(), StatusCode: a.StatusCode, LatencyMS: a.LatencyMS, Error: a.Error}
	}
	return v
}

// ParseCursor reads a cursor of List: "" for the first page, else the decimal id of the last
// delivery of the page before.
func ParseCursor(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	if len(s) > 19 || s[0] == '+' || s[0] == '-' || (len(s) > 1 && s[0] == '0') {
		return 0, ErrBadCursor
	}
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, ErrBadCursor
	}
	return id, nil
}

// Redeliver sends the event again to the endpoint named, enabling it again if a 410 disabled
// it; without a name, to every configured endpoint that takes the event's type (one disabled
// stays disabled). It answers the endpoints it queued the event to. ErrUnknownEndpoint for a
// name the configuration does not hold; payment.ErrNotFound for an event not stored (or not
// sequenced yet).
func (d *Dispatcher) Redeliver(ctx context.Context, eventID, endpoint string) ([]string, error) {
	var names []string
	if endpoint != "" {
		if _, ok := d.byName[endpoint]; !ok {
			return nil, ErrUnknownEndpoint
		}
	}
	ev, err := d.store.EventByID(ctx, eventID)
	if err != nil {
		return nil, err
	}
	if endpoint != "" {
		if err := d.store.EnsureWebhookEndpoint(ctx, endpoint, d.byName[endpoint].URL, d.o.Now()); err != nil {
			return nil, err
		}
		if err := d.store.EnableWebhookEndpoint(ctx, endpoint); err != nil {
			return nil, err
		}
		names = []string{endpoint}
	} else {
		for _, name := range d.names() {
			if d.byName[name].Wants(ev.Type) {
				names = append(names, name)
			}
		}
	}
	return names, d.store.Redeliver(ctx, ev, ShardOf(ev.TradeNo, d.o.Shards), names, d.o.Now())
}
