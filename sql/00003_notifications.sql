-- +goose Up
-- Each verified notification's first delivery. uk_channel_notify keeps a channel's retries of the
-- same notification from being journalled twice.
CREATE TABLE notify_journal (
  id             BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  channel        VARCHAR(16)  NOT NULL,
  notify_id      VARCHAR(128) NOT NULL,
  trade_no       VARCHAR(64)  NOT NULL,
  channel_txn_id VARCHAR(64)  NOT NULL,
  event          VARCHAR(16)  NOT NULL COMMENT 'PAID, CLOSED, PENDING, REFUND',
  channel_status VARCHAR(32)  NOT NULL COMMENT 'the channel''s own word, e.g. TRADE_SUCCESS',
  amount_fen     BIGINT       NOT NULL,
  currency       CHAR(3)      NOT NULL,
  raw_body       MEDIUMBLOB   NOT NULL,
  outcome        VARCHAR(32)  NOT NULL,
  received_time  DATETIME(3)  NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_channel_notify (channel, notify_id),
  KEY idx_trade_no (trade_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Verified payments that were not applied and need a person. uk_anomaly keeps a retried
-- notification from being flagged twice.
CREATE TABLE anomaly (
  id                  BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  kind                VARCHAR(32)  NOT NULL COMMENT 'AMOUNT_MISMATCH, PAID_AFTER_CLOSE, DUPLICATE_PAYMENT',
  trade_no            VARCHAR(64)  NOT NULL,
  channel             VARCHAR(16)  NOT NULL,
  channel_txn_id      VARCHAR(64)  NOT NULL,
  amount_fen          BIGINT       NOT NULL COMMENT 'what the channel says was paid',
  currency            CHAR(3)      NOT NULL,
  expected_amount_fen BIGINT       NULL COMMENT 'what the order asks for',
  detail              VARCHAR(512) NOT NULL,
  created_time        DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (id),
  UNIQUE KEY uk_anomaly (kind, channel, channel_txn_id),
  KEY idx_trade_no (trade_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE anomaly;
DROP TABLE notify_journal;
