-- +goose Up
-- Bill reconciliation: one run per (channel, bill_date), its bill lines staged for matching in
-- SQL, and one row per discrepancy keyed by (channel, bill_date, line key). A re-run of a day
-- replaces that day's lines and rows.
CREATE TABLE recon_run (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  channel     VARCHAR(16)  NOT NULL,
  bill_date   DATE         NOT NULL,
  started_at  DATETIME(3)  NOT NULL,
  finished_at DATETIME(3)  NULL,
  line_count  INT          NOT NULL DEFAULT 0,
  bad_lines   INT          NOT NULL DEFAULT 0,
  trusted     TINYINT(1)   NOT NULL DEFAULT 1 COMMENT '0: the bill''s summary disagrees with its lines',
  counts_json TEXT         NULL COMMENT 'lines per class',
  PRIMARY KEY (id),
  UNIQUE KEY uk_run (channel, bill_date)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE recon_line (
  run_id         BIGINT UNSIGNED NOT NULL,
  line_no        INT          NOT NULL,
  kind           VARCHAR(8)   NOT NULL COMMENT 'PAY, REFUND',
  trade_no       VARCHAR(64)  NOT NULL,
  channel_txn_id VARCHAR(128) NOT NULL,
  refund_id      VARCHAR(128) NOT NULL DEFAULT '',
  amount_fen     BIGINT       NOT NULL,
  currency       CHAR(3)      NOT NULL,
  line_time      DATETIME(3)  NOT NULL,
  PRIMARY KEY (run_id, line_no),
  KEY idx_run_txn (run_id, channel_txn_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE recon_discrepancy (
  id               BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  run_id           BIGINT UNSIGNED NOT NULL,
  channel          VARCHAR(16)  NOT NULL,
  bill_date        DATE         NOT NULL,
  line_key         VARCHAR(200) NOT NULL,
  class            VARCHAR(32)  NOT NULL,
  trade_no         VARCHAR(64)  NOT NULL DEFAULT '',
  channel_txn_id   VARCHAR(128) NOT NULL DEFAULT '',
  bill_amount_fen  BIGINT       NULL,
  local_amount_fen BIGINT       NULL,
  local_status     VARCHAR(16)  NOT NULL DEFAULT '',
  repair           VARCHAR(32)  NOT NULL DEFAULT '' COMMENT 'the apply outcome of a repair',
  detail           VARCHAR(256) NOT NULL DEFAULT '',
  PRIMARY KEY (id),
  UNIQUE KEY uk_line (channel, bill_date, line_key),
  KEY idx_run_class (run_id, class, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Orders paid by a channel within a day: the bill run's search for payments the bill lacks.
ALTER TABLE orders ADD KEY idx_channel_paid (channel, paid_time);

ALTER TABLE anomaly
  ADD COLUMN resolved_by  VARCHAR(32)  NULL AFTER status,
  ADD COLUMN resolved_at  DATETIME(3)  NULL AFTER resolved_by,
  ADD COLUMN resolve_note VARCHAR(512) NULL AFTER resolved_at;

-- +goose Down
ALTER TABLE anomaly DROP COLUMN resolve_note, DROP COLUMN resolved_at, DROP COLUMN resolved_by;
ALTER TABLE orders DROP KEY idx_channel_paid;
DROP TABLE recon_discrepancy;
DROP TABLE recon_line;
DROP TABLE recon_run;
