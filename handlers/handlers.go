// Package handlers is paygw's HTTP surface: the channels' notify_urls, the /v1 API for the order
// service and operators, and the health probes. Handlers return errors; one error handler turns
// them into RFC 9457 problems.
package handlers

import (
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/paygw/paygw/access"
	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/console"
	"github.com/paygw/paygw/guard"
	"github.com/paygw/paygw/metrics"
	"github.com/paygw/paygw/orders"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/repository"
)

// Applier applies a verified event exactly once (apply.Applier).
type Applier interface {
	Apply(ctx context.Context, ev payment.Event) (payment.Outcome, error)
}

// Config is what the handlers read of the configuration. Whether the create route uses
// idempotency keys is the orders service's to say.
type Config struct {
	BodyLimitBytes int64
	KeyHeader      string
	Tokens         []Token
	Metrics        *metrics.Metrics // nil counts nothing
	Webhooks       Webhooks         // the webhook deliveries (delivery.Dispatcher); nil: no webhook routes
	// EventsChanged, when not nil, returns a channel closed when this process next numbers
	// outbox events (outbox.Sequencer.Changed): it wakes the feed's long polls. Without it they
	// read the feed again every feedPoll.
	EventsChanged func() <-chan struct{}
	// Console, when not nil, serves the operators' console under /console.
	Console *console.Console
}

// Token is one API client: its name, its token (Secret) or the token's SHA-256 (Digest, used when
// Secret is empty), and its roles (none: admin).
type Token struct {
	Name, Secret string
	Digest       [sha256.Size]byte
	Roles        []access.Role
}

// Server holds the handlers' dependencies.
type Server struct {
	cfg      Config
	db       *repository.DB
	guard    *guard.Guard
	orders   *orders.Service
	applier  Applier
	channels []channels.Channel
	tokens   []token
	routed   map[string]bool // "METHOD /v1/pattern" of every /v1 route Echo registered
	log      zerolog.Logger
	now      func() time.Time
	full     atomic.Int64 // unix nanos of the last write MySQL refused for want of space

	stopping chan struct{} // closed by EndLongPolls
	stopOnce sync.Once
}

// storageFullHold is how long /readyz stays red after MySQL refused a write for want of space:
// the load balancer sends traffic elsewhere meanwhile, then lets it probe again. A full disk
// cannot be seen by a ping or a read, only by a write that fails.
const storageFullHold = 15 * time.Second

// noteFailure remembers a write refused for want of space, for /readyz.
func (s *Server) noteFailure(err error) {
	if repository.StorageFull(err) {
		s.full.Store(s.now().UnixNano())
	}
}

func New(cfg Config, db *repository.DB, g *guard.Guard, o *orders.Service, a Applier, chs []channels.Channel, log zerolog.Logger) *Server {
	return &Server{cfg: cfg, db: db, guard: g, orders: o, applier: a, channels: chs, tokens: digestTokens(cfg.Tokens), log: log, now: time.Now,
		stopping: make(chan struct{})}
}

// EndLongPolls answers every held feed request now, with what it has, and every later one
// without waiting: http.Server.Shutdown waits for handlers, and a 30 s long poll would outlast
// its drain (register it with RegisterOnShutdown).
func (s *Server) EndLongPolls() { s.stopOnce.Do(func() { close(s.stopping) }) }

// Echo builds the router with every route and the error handler.
func (s *Server) Echo() *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	e.Pre(requestID)
	e.Use(s.accessLog)
	e.Use(s.cfg.Metrics.Echo())
	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	for _, ch := range s.channels {
		e.POST("/notify/"+ch.Name(), s.notify(ch))
	}
	v1 := e.Group("/v1", s.auth)
	v1.PUT("/stock/:sku", s.putStock)
	v1.POST("/orders", s.createOrder)
	v1.GET("/orders", s.searchOrders)
	v1.GET("/orders/:trade_no", s.getOrder)
	v1.POST("/orders/:trade_no/attempts", s.addAttempt)
	v1.GET("/reconciliations", s.listRuns)
	v1.GET("/reconciliations/:id/discrepancies", s.listDiscrepancies)
	v1.GET("/reconciliations/:id/discrepancies.csv", s.exportDiscrepancies)
	v1.POST("/reconciliations/:channel/:date/signoff", s.signOff)
	v1.POST("/discrepancies/:id/resolve", s.resolveDiscrepancy)
	v1.GET("/anomalies", s.listAnomalies)
	v1.GET("/anomalies.csv", s.exportAnomalies)
	v1.POST("/anomalies/:id/resolve", s.resolveAnomaly)
	v1.GET("/payments/:trade_no", s.getPayment)
	v1.GET("/events", s.listEvents)
	v1.GET("/openapi.yaml", s.openAPI)
	v1.GET("/audit", s.listAudit)
	s.webhookRoutes(v1)
	if s.cfg.Console != nil {
		s.cfg.Console.Routes(e.Group(console.Prefix), consoleTokens{s})
	}
	s.routed = map[string]bool{}
	for _, r := range e.Routes() {
		s.routed[r.Method+" "+r.Path] = true
	}
	return e
}

func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// readyz is red only when MySQL does not answer or refuses writes (read-only, or a write refused
// for want of space within storageFullHold): every notification would be answered "retry".
// Without Redis paygw is slower, never wrong.
func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), time.Second)
	defer cancel()
	body := map[string]string{"status": "ready", "mysql": "ok", "redis": "ok"}
	code := http.StatusOK
	if err := s.db.Ping(ctx); err != nil {
		body["status"], body["mysql"], code = "unavailable", "down", http.StatusServiceUnavailable
	} else if ro, err := s.db.ReadOnly(ctx); err != nil || ro {
		body["status"], body["mysql"], code = "unavailable", "read_only", http.StatusServiceUnavailable
		if err != nil {
			body["mysql"] = "down"
		}
	} else if full := s.full.Load(); full != 0 && s.now().Sub(time.Unix(0, full)) < storageFullHold {
		body["status"], body["mysql"], code = "unavailable", "full", http.StatusServiceUnavailable
	}
	if err := s.guard.Ping(ctx); err != nil {
		body["redis"] = "down"
		if code == http.StatusOK {
			body["status"] = "degraded"
		}
	}
	return c.JSON(code, body)
}

// readBody reads the whole body once, refusing more than the configured limit.
func (s *Server) readBody(c echo.Context) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), c.Request().Body, s.cfg.BodyLimitBytes))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, errTooLarge
	}
	if err != nil {
		return nil, errBadBody
	}
	return body, nil
}

func (s *Server) getOrder(c echo.Context) error {
	tradeNo := c.Param("trade_no")
	if !payment.ValidTradeNo(tradeNo) {
		return payment.ErrNotFound
	}
	o, err := s.db.GetOrder(c.Request().Context(), tradeNo)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, viewOf(o))
}
