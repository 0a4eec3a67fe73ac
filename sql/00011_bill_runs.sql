-- +goose Up
-- Bill runs are all or nothing, and a day has one result per (channel, source): runs are kept as
-- rows of their own with a status, and the day's result is its latest complete run.
--   source: where the lines came from: 'channel' (the channel's own bill, downloaded or as a file
--           in its format) or 'csv' (paygw's generic format). A csv run never replaces the
--           channel's, and each is cut at the channel's own day.
--   status: 'running' while staging and matching (nothing reads its lines but itself), 'failed'
--           with its error (its lines and rows are gone), 'complete'.
ALTER TABLE recon_run
  DROP KEY uk_run,
  ADD COLUMN source VARCHAR(16)  NOT NULL DEFAULT 'channel' AFTER bill_date,
  ADD COLUMN status VARCHAR(16)  NOT NULL DEFAULT 'complete' AFTER source,
  ADD COLUMN error  VARCHAR(512) NOT NULL DEFAULT '' AFTER counts_json,
  ADD KEY idx_day (channel, source, bill_date, status, id);
UPDATE recon_run SET status = 'failed', error = 'unfinished when migration 00011 ran' WHERE finished_at IS NULL;
DELETE l FROM recon_line l JOIN recon_run r ON r.id = l.run_id WHERE r.status = 'failed';
DELETE d FROM recon_discrepancy d JOIN recon_run r ON r.id = d.run_id WHERE r.status = 'failed';

-- A run's rows are its own: a later run of the day adds its rows beside them.
ALTER TABLE recon_discrepancy DROP KEY uk_line, ADD UNIQUE KEY uk_line (run_id, line_key);

-- When the holder took the lease (kept while it renews), so a refused taker can say since when.
ALTER TABLE job_lease ADD COLUMN taken_at DATETIME(3) NULL AFTER holder;

-- +goose Down
ALTER TABLE job_lease DROP COLUMN taken_at;
-- One run per (channel, bill_date) again: the latest complete channel run of each day stays.
DELETE r FROM recon_run r WHERE r.status <> 'complete' OR r.source <> 'channel' OR EXISTS (
  SELECT 1 FROM (SELECT id, channel, bill_date FROM recon_run WHERE status = 'complete' AND source = 'channel') n
  WHERE n.channel = r.channel AND n.bill_date = r.bill_date AND n.id > r.id);
DELETE l FROM recon_line l LEFT JOIN recon_run r ON r.id = l.run_id WHERE r.id IS NULL;
DELETE d FROM recon_discrepancy d LEFT JOIN recon_run r ON r.id = d.run_id WHERE r.id IS NULL;
ALTER TABLE recon_discrepancy DROP KEY uk_line, ADD UNIQUE KEY uk_line (channel, bill_date, line_key);
ALTER TABLE recon_run DROP KEY idx_day, DROP COLUMN error, DROP COLUMN status, DROP COLUMN source,
  ADD UNIQUE KEY uk_run (channel, bill_date);
