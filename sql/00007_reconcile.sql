-- +goose Up
-- Payment attempts: which channel the buyer was sent to, so the reconciliation job knows whom to
-- ask about an order whose notification never came, and when to ask next.
CREATE TABLE payment_attempt (
  id            BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  trade_no      VARCHAR(32)  NOT NULL,
  channel       VARCHAR(16)  NOT NULL,
  channel_ref   VARCHAR(128) NOT NULL DEFAULT '' COMMENT 'Stripe PaymentIntent id, UnionPay txnTime',
  implicit      TINYINT(1)   NOT NULL DEFAULT 0 COMMENT '1: made by the job for an order with no attempt',
  created_time  DATETIME(3)  NOT NULL,
  next_query_at DATETIME(3)  NOT NULL,
  query_count   INT          NOT NULL DEFAULT 0,
  last_query_at DATETIME(3)  NULL,
  last_answer   VARCHAR(16)  NOT NULL DEFAULT '' COMMENT 'PAID, PAID_REFUNDED, CLOSED, NOT_PAID, FAILED, UNVERIFIED',
  last_status   VARCHAR(128) NOT NULL DEFAULT '' COMMENT 'the channel''s own words, or why asking failed',
  PRIMARY KEY (id),
  UNIQUE KEY uk_attempt (trade_no, channel, channel_ref),
  KEY idx_due (next_query_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- One replica at a time runs a job: a lease taken with a conditional UPDATE and an expiry.
CREATE TABLE job_lease (
  name       VARCHAR(32) NOT NULL,
  holder     VARCHAR(64) NOT NULL,
  expires_at DATETIME(3) NOT NULL,
  PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=ascii COLLATE=ascii_bin;
INSERT INTO job_lease (name, holder, expires_at) VALUES ('reconcile_query', '', '1970-01-01 00:00:01');

-- Where a journalled event came from: the channel's notification, or the job's trade query.
ALTER TABLE notify_journal ADD COLUMN source VARCHAR(8) NOT NULL DEFAULT 'notify' AFTER channel;

-- +goose Down
ALTER TABLE notify_journal DROP COLUMN source;
DROP TABLE job_lease;
DROP TABLE payment_attempt;
