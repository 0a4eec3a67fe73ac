package handlers

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/notify"
	"github.com/paygw/paygw/payment"
)

// notify is a channel's notify_url. Order of work: read the body once, verify the raw bytes,
// and only then touch Redis or MySQL through the one Applier. The reply is in the channel's own
// words: success for anything held durably (repeats included), refusal for what fails
// verification, retry for whatever we could not finish.
func (s *Server) notify(ch channels.Channel) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := s.now()
		log := s.log.With().Str("channel", ch.Name()).Logger()
		body, err := s.readBody(c)
		switch {
		case errors.Is(err, errTooLarge):
			log.Warn().Err(err).Msg("notification body refused")
			return writeReply(c, http.StatusRequestEntityTooLarge, ch.Reply(payment.ReplyRefuse))
		case err != nil: // the body did not arrive whole (too slow, cut off): refused, nothing read
			log.Warn().Err(err).Msg("notification body unreadable")
			return writeReply(c, http.StatusRequestTimeout, ch.Reply(payment.ReplyRefuse))
		}
		ev, err := ch.Verify(body, c.Request().Header, start)
		if err != nil {
			// Warn, not info: a wrong or rotated key refuses every real payment until someone
			// notices, and the channel gives up after its last retry.
			log.Warn().Err(err).Dur("latency", s.now().Sub(start)).Str("outcome", "REFUSED").Msg("notification")
			return writeReply(c, 0, ch.Reply(payment.ReplyRefuse))
		}
		log = log.With().Str("trade_no", ev.TradeNo).Str("notify_id", ev.NotifyID).Str("event", string(ev.Kind)).Logger()
		ctx, cancel := context.WithTimeout(c.Request().Context(), notify.ApplyTimeout)
		defer cancel()
		outcome, err := s.applier.Apply(ctx, ev)
		if err != nil {
			log.Warn().Err(err).Dur("latency", s.now().Sub(start)).Str("outcome", "RETRY").Msg("notification")
			return writeReply(c, 0, ch.Reply(payment.ReplyRetry))
		}
		level := log.Info()
		if outcome.IsAnomaly() || outcome == payment.OutcomeUnknownOrder {
			level = log.Warn()
		}
		level.Dur("latency", s.now().Sub(start)).Str("outcome", string(outcome)).Msg("notification")
		return writeReply(c, 0, ch.Reply(outcome.Reply()))
	}
}

// writeReply writes a channel's reply; status overrides its status code when not zero.
func writeReply(c echo.Context, status int, r channels.Response) error {
	if status == 0 {
		status = r.Status
	}
	return c.Blob(status, r.ContentType, r.Body)
}
