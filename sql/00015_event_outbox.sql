-- +goose Up
-- The outbox: one row per state change (order.paid, order.refunded, order.closed,
-- payment.anomaly), inserted in the same transaction as the change, so an event exists if and
-- only if its change committed.
--   event_id: 'evt_' and a random suffix, unique and stable: the Standard Webhooks webhook-id
--             and the id in the body.
--   seq:      the commit order. NULL when the row commits; the sequencer (one holder at a time)
--             numbers committed rows afterwards, so a reader that pages by seq never skips an
--             event whose transaction committed after a later one's.
--   body:     the event's JSON exactly as served and delivered (signatures cover these bytes),
--             built by MariaDB from the order row in the change's own INSERT ... SELECT.
-- No index on created_time: the retention purge walks the primary key (ids grow with time), and
-- every index is paid for by every payment's transaction.
CREATE TABLE event (
  id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  event_id     VARCHAR(40)     NOT NULL,
  seq          BIGINT UNSIGNED NULL,
  type         VARCHAR(32)     NOT NULL,
  trade_no     VARCHAR(32)     NOT NULL,
  body         MEDIUMBLOB      NOT NULL,
  created_time DATETIME(3)     NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_event_id (event_id),
  UNIQUE KEY uk_seq (seq),
  KEY idx_trade (trade_no, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE event;
