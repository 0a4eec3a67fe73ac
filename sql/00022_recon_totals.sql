-- +goose Up
-- A bill run's own totals, one row per currency of its lines: what the lines add up to, and what
-- the bill states of itself. Fees are in paygw's sign (positive charged, negative returned with a
-- refund); net_fen is gross_fen - refund_fen - fee_fen, what the day settles to the merchant.
-- Written once the whole bill is read (a bill refused as another merchant's or day's has none).
--   fee_lines:       the lines that state a fee; 0 when the bill states none (fee_fen is then 0).
--   stated_net_fen:  the lines' own net summed, when each line states one (Stripe).
--   summary_fee_fen: the bill summary's fee total (WeChat's 手续费总金额), on a bill of one currency.
CREATE TABLE recon_run_total (
  run_id          BIGINT UNSIGNED NOT NULL,
  currency        CHAR(3) NOT NULL,
  pay_count       INT     NOT NULL,
  refund_count    INT     NOT NULL,
  gross_fen       BIGINT  NOT NULL,
  refund_fen      BIGINT  NOT NULL,
  fee_fen         BIGINT  NOT NULL,
  fee_lines       INT     NOT NULL,
  net_fen         BIGINT  NOT NULL,
  stated_net_fen  BIGINT  NULL,
  summary_fee_fen BIGINT  NULL,
  PRIMARY KEY (run_id, currency)
) ENGINE=InnoDB DEFAULT CHARSET=ascii COLLATE=ascii_bin;

-- +goose Down
DROP TABLE recon_run_total;
