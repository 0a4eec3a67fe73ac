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
		switch {
		case errors.Is(err, errTooLarge):
			s.cfg.Metrics.VerifyFailure(ch.Name(), metrics.ReasonTooLarge)
			s.countNotification(ch, metrics.OutcomeRefused, start)
			s.logNotification(c, zerolog.WarnLevel, ch, nil, "REFUSED", start, err)
			return writeReply(c, http.StatusRequestEntityTooLarge, ch.Reply(payment.ReplyRefuse))
		case err != nil: // the body did not arrive whole (too slow, cut off): refused, nothing read
			s.cfg.Metrics.VerifyFailure(ch.Name(), metrics.ReasonBody)
			s.countNotification(ch, metrics.OutcomeRefused, start)
			s.logNotification(c, zerolog.WarnLevel, ch, nil, "REFUSED", start, err)
			return writeReply(c, http.StatusRequestTimeout, ch.Reply(payment.ReplyRefuse))
		}
		ev, err := ch.Verify(body, c.Request().Header, start)
		switch {
		case errors.Is(err, channels.ErrProbe):
			// The channel testing that we verify: refused as it expects, and no sign of a key
			// problem, so it is not a warning.
			s.cfg.Metrics.VerifyFailure(ch.Name(), metrics.ReasonProbe)
			s.countNotification(ch, metrics.OutcomeProbe, start)
			s.logNotification(c, zerolog.InfoLevel, ch, nil, "probe", start, err)
			return writeReply(c, 0, ch.Reply(payment.ReplyRefuse))
		case err != nil:
			// Warn, not info: a wrong or rotated key refuses every real payment until someone
			// notices, and the channel gives up after its last retry.
			s.cfg.Metrics.VerifyFailure(ch.Name(), verifyReason(err))
			s.countNotification(ch, metrics.OutcomeRefused, start)
			s.logNotification(c, zerolog.WarnLevel, ch, nil, "REFUSED", start, err)
			s.rememberRefusal(c.Request().Context(), ch.Name(), body, start, err)
			return writeReply(c, 0, ch.Reply(payment.ReplyRefuse))
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

// verifyReason maps a channel's verification error to its paygw_verify_failures_total reason.
// ErrProbe wraps ErrBadSignature, so it is asked first.
func verifyReason(err error) string {
	switch {
	case errors.Is(err, channels.ErrProbe):
		return metrics.ReasonProbe
	case errors.Is(err, channels.ErrStale):
		return metrics.ReasonStale
	case errors.Is(err, channels.ErrBadSignature):
		return metrics.ReasonBadSignature
	case errors.Is(err, channels.ErrNotOurs):
		return metrics.ReasonNotOurs
	case errors.Is(err, channels.ErrUnsupported):
		return metrics.ReasonUnsupported
	case errors.Is(err, channels.ErrMalformed):
		return metrics.ReasonMalformed
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
