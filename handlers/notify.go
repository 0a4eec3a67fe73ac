package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/explain"
	"github.com/paygw/paygw/metrics"
	"github.com/paygw/paygw/payment"
)

// notify is a channel's notify_url. Order of work: read the body once, verify the raw bytes,
// and only then touch Redis or MySQL through the one Applier. The reply is in the channel's own
// words: success for anything held durably (repeats included), refusal for what fails
// verification, retry for whatever we could not finish.
func (s *Server) notify(ch channels.Channel) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := s.now()
		body, err := s.readBody(c)
		if err != nil {
			return s.refuse(c, ch, start, nil, readRefusal(err), err)
		}
		ev, err := ch.Verify(body, c.Request().Header, start)
		if err != nil {
			return s.refuse(c, ch, start, body, verifyRefusal(err), err)
		}
		// Each channel waits its own time for the reply (WeChat 5 s, UnionPay 10 s): past the
		// channel's deadline we answer "retry" before it stops listening.
		ctx, cancel := context.WithTimeout(c.Request().Context(), ch.ApplyTimeout())
		defer cancel()
		outcome, err := s.applier.Apply(ctx, ev)
		if err != nil {
			s.noteFailure(err)
			s.countNotification(ch, metrics.OutcomeRetry, start)
			s.logNotification(c, zerolog.WarnLevel, ch, &ev, "RETRY", start, err)
			return writeReply(c, 0, ch.Reply(payment.ReplyRetry))
		}
		level := zerolog.InfoLevel
		if outcome.IsAnomaly() || outcome == payment.OutcomeUnknownOrder {
			level = zerolog.WarnLevel
		}
		s.countNotification(ch, string(outcome), start)
		s.logNotification(c, level, ch, &ev, string(outcome), start, nil)
		return writeReply(c, 0, ch.Reply(outcome.Reply()))
	}
}

// refusal is how a notification refused before apply is counted, logged and answered.
type refusal struct {
	reason   string        // paygw_verify_failures_total's reason
	outcome  string        // paygw_notifications_total's outcome
	logAs    string        // the log line's outcome
	level    zerolog.Level // the log line's level
	status   int           // overrides the status of the channel's refusal reply; 0 keeps it
	remember bool          // noted for `paygw why`: a message naming an order was refused
}

// readRefusal is the refusal of a body that did not arrive: too large, or not whole (too slow,
// cut off). Nothing of it was read.
func readRefusal(err error) refusal {
	if errors.Is(err, errTooLarge) {
		return refusal{reason: metrics.ReasonTooLarge, outcome: metrics.OutcomeRefused, logAs: "REFUSED", level: zerolog.WarnLevel,
			status: http.StatusRequestEntityTooLarge}
	}
	return refusal{reason: metrics.ReasonBody, outcome: metrics.OutcomeRefused, logAs: "REFUSED", level: zerolog.WarnLevel,
		status: http.StatusRequestTimeout}
}

// verifyRefusal is the refusal of a body that did not verify. A probe is the channel testing that
// we verify: refused as it expects, and no sign of a key problem, so it is not a warning. Any
// other is: a wrong or rotated key refuses every real payment until someone notices, and the
// channel gives up after its last retry.
func verifyRefusal(err error) refusal {
	if errors.Is(err, channels.ErrProbe) {
		return refusal{reason: metrics.ReasonProbe, outcome: metrics.OutcomeProbe, logAs: "probe", level: zerolog.InfoLevel}
	}
	return refusal{reason: verifyReason(err), outcome: metrics.OutcomeRefused, logAs: "REFUSED", level: zerolog.WarnLevel, remember: true}
}

// refuse counts, logs and answers one refused notification, in the channel's words.
func (s *Server) refuse(c echo.Context, ch channels.Channel, start time.Time, body []byte, r refusal, err error) error {
	s.cfg.Metrics.VerifyFailure(ch.Name(), r.reason)
	s.countNotification(ch, r.outcome, start)
	s.logNotification(c, r.level, ch, nil, r.logAs, start, err)
	if r.remember {
		s.rememberRefusal(c.Request().Context(), ch.Name(), body, start, err)
	}
	return writeReply(c, r.status, ch.Reply(payment.ReplyRefuse))
}

// verifyReasons maps a channel's verification error to its paygw_verify_failures_total reason,
// the first that matches. ErrProbe wraps ErrBadSignature, so it is asked first.
var verifyReasons = []struct {
	err    error
	reason string
}{
	{channels.ErrProbe, metrics.ReasonProbe},
	{channels.ErrStale, metrics.ReasonStale},
	{channels.ErrBadSignature, metrics.ReasonBadSignature},
	{channels.ErrNotOurs, metrics.ReasonNotOurs},
	{channels.ErrUnsupported, metrics.ReasonUnsupported},
	{channels.ErrMalformed, metrics.ReasonMalformed},
}

// verifyReason is err's reason (verifyReasons), metrics.ReasonOther for any other error.
func verifyReason(err error) string {
	for _, r := range verifyReasons {
		if errors.Is(err, r.err) {
			return r.reason
		}
	}
	return metrics.ReasonOther
}

// countNotification counts a notification by its outcome: an apply outcome (a fixed set), or
// one of metrics' refusal and retry outcomes. Never a trade_no or any other value sent to us.
func (s *Server) countNotification(ch channels.Channel, outcome string, start time.Time) {
	s.cfg.Metrics.Notification(ch.Name(), outcome, s.now().Sub(start))
}

// logNotification writes the one line per notification: request id, channel, trade_no, notify id, event,
// outcome, latency; never a key, a token or a signature (channel errors carry none). The fields
// go on the event alone, so a disabled level costs nothing on the hot path.
func (s *Server) logNotification(c echo.Context, level zerolog.Level, ch channels.Channel, ev *payment.Event, outcome string, start time.Time, err error) {
	e := s.log.WithLevel(level)
	if e == nil {
		return
	}
	e = e.Str("request_id", requestIDOf(c)).Str("channel", ch.Name())
	if ev != nil {
		e = e.Str("trade_no", ev.TradeNo).Str("notify_id", ev.NotifyID).Str("event", string(ev.Kind))
	}
	e.Err(err).Dur("latency", s.now().Sub(start)).Str("outcome", outcome).Msg("notification")
}

// writeReply writes a channel's reply; status overrides its status code when not zero.
func writeReply(c echo.Context, status int, r channels.Response) error {
	if status == 0 {
		status = r.Status
	}
	return c.Blob(status, r.ContentType, r.Body)
}

// rememberRefusal keeps, in Redis only, that a message claiming to be about an order was refused,
// so that "why is this order not paid?" can say so.
func (s *Server) rememberRefusal(ctx context.Context, channel string, body []byte, at time.Time, reason error) {
	tradeNo := channels.ClaimedTradeNo(channel, body)
	if tradeNo == "" {
		return
	}
	entry, _ := json.Marshal(explain.Refusal{At: at.UTC(), Channel: channel, Reason: reason.Error()}) // cannot fail
	s.guard.RecordRefusal(context.WithoutCancel(ctx), tradeNo, string(entry))
}
