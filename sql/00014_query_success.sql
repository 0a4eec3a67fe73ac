-- +goose Up
-- When the reconciliation query last succeeded for each channel: a run that could ask the
-- channel (nothing was due, or at least one answer verified). Bill runs need no table of their
-- own: recon_run keeps each complete run. paygw_reconcile_last_success_timestamp_seconds reads
-- both, so the gauge survives restarts and counts the CLI's runs too.
CREATE TABLE recon_query_success (
  channel      VARCHAR(16) NOT NULL,
  succeeded_at DATETIME(3) NOT NULL,
  PRIMARY KEY (channel)
) ENGINE=InnoDB DEFAULT CHARSET=ascii COLLATE=ascii_bin;

-- +goose Down
DROP TABLE recon_query_success;
