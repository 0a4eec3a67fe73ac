package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/paygw/paygw/access"
	"github.com/paygw/paygw/delivery"
	"github.com/paygw/paygw/orders"
	"github.com/paygw/paygw/payment"
)

// Webhooks is what the webhook routes need (delivery.Dispatcher).
type Webhooks interface {
	List(ctx context.Context, q delivery.Query) (delivery.Page, error)
	Redeliver(ctx context.Context, eventID, endpoint string) ([]string, error)
}

var _ Webhooks = (*delivery.Dispatcher)(nil)

// webhookRoutes adds GET /v1/webhooks/deliveries and POST /v1/events/{id}/redeliver, when the
// configuration gives the deliveries (Config.Webhooks).
func (s *Server) webhookRoutes(v1 *echo.Group) {
	if s.cfg.Webhooks == nil {
		return
	}
	v1.GET("/webhooks/deliveries", s.listDeliveries)
	v1.POST("/events/:id/redeliver", s.redeliver)
}

// listDeliveries is GET /v1/webhooks/deliveries?endpoint=&status=&cursor=: one item per event
// and endpoint, oldest first, each with its attempts.
func (s *Server) listDeliveries(c echo.Context) error {
	q := delivery.Query{Endpoint: c.QueryParam("endpoint"), Status: c.QueryParam("status"), Cursor: c.QueryParam("cursor")}
	if len(q.Endpoint) > 64 {
		return fmt.Errorf("%w: endpoint is a configured endpoint's name (at most 64 bytes)", errBadQuery)
	}
	page, err := s.cfg.Webhooks.List(c.Request().Context(), q)
	if errors.Is(err, delivery.ErrBadStatus) || errors.Is(err, delivery.ErrBadCursor) || errors.Is(err, delivery.ErrBadLimit) {
		return fmt.Errorf("%w: %w", errBadQuery, err)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, page)
}

// redeliver is POST /v1/events/{id}/redeliver {"endpoint": NAME}: the event again to that
// endpoint, or, without a body or a name, to every endpoint that takes its type. 202: queued.
func (s *Server) redeliver(c echo.Context) error {
	id := c.Param("id")
	if id == "" || len(id) > 40 {
		return payment.ErrNotFound
	}
	body, err := s.readBody(c)
	if err != nil {
		return err
	}
	var in struct {
		Endpoint string `json:"endpoint"`
	}
	if len(body) > 0 {
		canonical, err := orders.Canonical(body)
		if err != nil {
			return err
		}
		if err := decodeStrict(canonical, &in); err != nil {
			return fmt.Errorf("%w: send {\"endpoint\": NAME} or no body", errBadQuery)
		}
	}
	names, err := s.cfg.Webhooks.Redeliver(c.Request().Context(), id, in.Endpoint)
	if errors.Is(err, delivery.ErrUnknownEndpoint) {
		return fmt.Errorf("%w: %w", errBadQuery, err)
	}
	if err != nil {
		return err
	}
	if names == nil {
		names = []string{}
	}
	e := s.entry(c, "event.redeliver", "event:"+id)
	e.After = access.State(map[string]any{"endpoints": names})
	s.auditAfter(c, e)
	return c.JSON(http.StatusAccepted, map[string]any{"event_id": id, "endpoints": names})
}
