package handlers

import (
	"errors"

	"github.com/labstack/echo/v4"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/payment"
)

// notify is a channel's notify_url. Order of work: read the body once, verify the raw bytes,
// and only then touch Redis or MySQL through the one Applier. The reply is in the channel's own
// words: success for anything held durably (repeats included), refusal for what fails
// verification, retry for whatever we could not finish.
func (s *Server) notify(ch Channel) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := s.now()
		log := s.log.With().Str("channel", ch.Name()).Logger()
		body, err := s.readBody(c)
		if err != nil {
			log.Info().Err(err).Msg("notification body refused")
			if errors.Is(err, errTooLarge) {
				return writeReply(c, 413, ch.Reply(payment.ReplyRefuse))
			}
			return writeReply(c, 0, ch.Reply(payment.ReplyRefuse))
		}
		ev, err := ch.Verify(body, c.Request().Header, start)
		if err != nil {
			log.Info().Err(err).Dur("latency", s.now().Sub(start)).Str("outcome", "REFUSED").Msg("notification")
			return writeReply(c, 0, ch.Reply(payment.ReplyRefuse))
		}
		log = log.With().Str("trade_no", ev.TradeNo).Str("notify_id", ev.NotifyID).Str("event", string(ev.Kind)).Logger()
		outcome, err := s.applier.Apply(c.Request().Context(), ev)
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
