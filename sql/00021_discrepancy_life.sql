-- +goose Up
-- Discrepancies have a life across a day's runs. recon_discrepancy keeps what each run found
-- (its rows stay with the run); recon_item is the discrepancy itself: one row per (channel,
-- source, bill_date, line_key) whatever the number of runs, with a stable id and a status.
--   status: 'open' (a person must look; PENDING included), 'repaired' (paygw applied the fix:
--           repaired_outcome and repaired_run_id), 'resolved' (a person decided: resolve_*),
--           'gone' (a later trusted run of the day no longer finds it, or the next day's bill
--           settled a PENDING payment: gone_run_id).
--   The other columns are the discrepancy as the latest run that found it saw it (last_run_id);
--   line: the bill line of a CHANNEL_ONLY or REFUND_CHANNEL_ONLY (JSON), what accept_channel
--   applies. opened_run_id: the run that last made a repaired or gone item open again.
CREATE TABLE recon_item (
  id               BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  channel          VARCHAR(16)  NOT NULL,
  source           VARCHAR(16)  NOT NULL,
  bill_date        DATE         NOT NULL,
  line_key         VARCHAR(200) NOT NULL,
  class            VARCHAR(32)  NOT NULL,
  trade_no         VARCHAR(64)  NOT NULL DEFAULT '',
  channel_txn_id   VARCHAR(128) NOT NULL DEFAULT '',
  bill_amount_fen  BIGINT       NULL,
  local_amount_fen BIGINT       NULL,
  currency         CHAR(3)      NOT NULL DEFAULT '',
  local_status     VARCHAR(16)  NOT NULL DEFAULT '',
  repair           VARCHAR(32)  NOT NULL DEFAULT '',
  detail           VARCHAR(256) NOT NULL DEFAULT '',
  line             TEXT         NULL,
  status           VARCHAR(16)  NOT NULL DEFAULT 'open',
  first_run_id     BIGINT UNSIGNED NOT NULL,
  last_run_id      BIGINT UNSIGNED NOT NULL,
  opened_run_id    BIGINT UNSIGNED NULL,
  repaired_run_id  BIGINT UNSIGNED NULL,
  repaired_outcome VARCHAR(32)  NOT NULL DEFAULT '',
  gone_run_id      BIGINT UNSIGNED NULL,
  resolved_by      VARCHAR(80)  NULL,
  resolved_at      DATETIME(3)  NULL,
  resolve_action   VARCHAR(32)  NULL,
  resolve_note     VARCHAR(512) NULL,
  resolve_outcome  VARCHAR(32)  NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_item (channel, source, bill_date, line_key),
  KEY idx_list (channel, source, bill_date, id),
  KEY idx_day_status (channel, bill_date, status)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- A run's row names its item; currency and line are what the item needs of it.
ALTER TABLE recon_discrepancy
  ADD COLUMN item_id  BIGINT UNSIGNED NULL AFTER run_id,
  ADD COLUMN currency CHAR(3) NOT NULL DEFAULT '' AFTER local_amount_fen,
  ADD COLUMN line     TEXT NULL AFTER detail,
  ADD KEY idx_run_item (run_id, item_id);

-- Per class and currency, the count and the amount of a run's lines (JSON list).
ALTER TABLE recon_run ADD COLUMN totals_json TEXT NULL AFTER counts_json;

-- A channel's day signed off by a person; a later run that finds something new reopens it.
--   status: 'signed_off' or 'reopened'; reopen_count: how many times runs reopened the day
--   (paygw_reconcile_reopened_total reads their sum).
CREATE TABLE recon_signoff (
  channel         VARCHAR(16)  NOT NULL,
  bill_date       DATE         NOT NULL,
  status          VARCHAR(16)  NOT NULL,
  signed_off_by   VARCHAR(80)  NOT NULL,
  signed_off_at   DATETIME(3)  NOT NULL,
  note            VARCHAR(512) NOT NULL DEFAULT '',
  reopened_at     DATETIME(3)  NULL,
  reopened_run_id BIGINT UNSIGNED NULL,
  reopen_count    INT          NOT NULL DEFAULT 0,
  PRIMARY KEY (channel, bill_date)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- The rows kept so far become items: one per line key, as its latest row saw it.
INSERT INTO recon_item (channel, source, bill_date, line_key, class, trade_no, channel_txn_id, bill_amount_fen,
    local_amount_fen, local_status, repair, detail, status, first_run_id, last_run_id, repaired_run_id, repaired_outcome)
  SELECT d.channel, g.source, d.bill_date, d.line_key, d.class, d.trade_no, d.channel_txn_id, d.bill_amount_fen,
    d.local_amount_fen, d.local_status, d.repair, d.detail,
    IF((d.class = 'CHANNEL_ONLY' AND d.repair = 'APPLIED') OR (d.class = 'REFUND_CHANNEL_ONLY' AND d.repair = 'REFUNDED'), 'repaired', 'open'),
    g.first_run, d.run_id,
    IF((d.class = 'CHANNEL_ONLY' AND d.repair = 'APPLIED') OR (d.class = 'REFUND_CHANNEL_ONLY' AND d.repair = 'REFUNDED'), d.run_id, NULL),
    IF((d.class = 'CHANNEL_ONLY' AND d.repair = 'APPLIED') OR (d.class = 'REFUND_CHANNEL_ONLY' AND d.repair = 'REFUNDED'), d.repair, '')
  FROM (SELECT r.source, MIN(x.run_id) AS first_run, MAX(x.id) AS last_id FROM recon_discrepancy x JOIN recon_run r ON r.id = x.run_id
        GROUP BY x.channel, r.source, x.bill_date, x.line_key) g
  JOIN recon_discrepancy d ON d.id = g.last_id;
UPDATE recon_discrepancy d JOIN recon_run r ON r.id = d.run_id
  JOIN recon_item i ON i.channel = d.channel AND i.source = r.source AND i.bill_date = d.bill_date AND i.line_key = d.line_key
  SET d.item_id = i.id;
-- An open item its day's latest trusted run did not find is gone.
UPDATE recon_item i
  JOIN (SELECT channel, source, bill_date, MAX(id) AS id FROM recon_run WHERE status = 'complete' AND trusted = 1
        GROUP BY channel, source, bill_date) r ON r.channel = i.channel AND r.source = i.source AND r.bill_date = i.bill_date
  SET i.status = 'gone', i.gone_run_id = r.id
  WHERE i.status = 'open' AND i.last_run_id < r.id;

-- +goose Down
DROP TABLE recon_signoff;
ALTER TABLE recon_run DROP COLUMN totals_json;
ALTER TABLE recon_discrepancy DROP KEY idx_run_item, DROP COLUMN line, DROP COLUMN currency, DROP COLUMN item_id;
DROP TABLE recon_item;
