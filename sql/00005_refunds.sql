-- +goose Up
-- Refunds apply once, like payments: a refund_notify record keyed by the channel's refund id, a
-- refund row with its own unique key, and the order's refunded_fen grown in the same transaction.
-- refunds_pending counts this order's refunds that arrived before their payment was applied; a
-- payment to an order with any takes the slow path, which counts them in.
ALTER TABLE orders
  ADD COLUMN refunded_fen    BIGINT   NOT NULL DEFAULT 0 AFTER paid_time,
  ADD COLUMN refunds_pending INT      NOT NULL DEFAULT 0 AFTER refunded_fen,
  ADD COLUMN request_hash    CHAR(64) NULL COMMENT 'request_hash of the create that made it' AFTER idem_key,
  ADD CONSTRAINT ck_orders_refunded CHECK (refunded_fen >= 0 AND refunded_fen <= amount_fen),
  ADD CONSTRAINT ck_orders_refunds_pending CHECK (refunds_pending >= 0);

CREATE TABLE refund (
  id             BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  channel        VARCHAR(16)  NOT NULL,
  refund_id      VARCHAR(128) NOT NULL COMMENT 'the channel''s id of the refund',
  trade_no       VARCHAR(32)  NOT NULL,
  channel_txn_id VARCHAR(128) NOT NULL COMMENT 'the payment it undoes',
  stated_fen     BIGINT       NOT NULL COMMENT 'the amount the channel stated',
  stated_total   TINYINT(1)   NOT NULL COMMENT '1: stated_fen is the payment''s running refunded total',
  amount_fen     BIGINT       NOT NULL DEFAULT 0 COMMENT 'what it added to orders.refunded_fen',
  currency       CHAR(3)      NOT NULL,
  status         ENUM('APPLIED','PENDING','ANOMALY','REFUSED') NOT NULL,
  created_time   DATETIME(3)  NOT NULL,
  update_time    DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (id),
  UNIQUE KEY uk_refund (channel, refund_id),
  KEY idx_trade_no (trade_no),
  KEY idx_payment_status (channel, channel_txn_id, status),
  CONSTRAINT ck_refund_amounts CHECK (stated_fen >= 0 AND amount_fen >= 0)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

ALTER TABLE anomaly
  ADD COLUMN status ENUM('open','refunded') NOT NULL DEFAULT 'open' AFTER detail;

ALTER TABLE notify_journal ADD COLUMN subject VARCHAR(256) NOT NULL DEFAULT '' AFTER currency;

-- +goose Down
ALTER TABLE notify_journal DROP COLUMN subject;
ALTER TABLE anomaly DROP COLUMN status;
DROP TABLE refund;
ALTER TABLE orders
  DROP CONSTRAINT ck_orders_refunds_pending,
  DROP CONSTRAINT ck_orders_refunded,
  DROP COLUMN request_hash,
  DROP COLUMN refunds_pending,
  DROP COLUMN refunded_fen;
