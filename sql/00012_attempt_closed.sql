-- +goose Up
-- An attempt's own end: when its channel said the trade there can no longer be paid (closed,
-- canceled, revoked), or when reconcile.query_max_age passed after another channel closed. An
-- order becomes CLOSED only once none of its attempts is open (apply decides, in the close's
-- transaction); an open attempt keeps being asked, whatever another channel answered.
-- idx_open serves the job's two scans: open attempts made in a window of created_time.
ALTER TABLE payment_attempt
  ADD COLUMN closed_time DATETIME(3) NULL COMMENT 'NULL: can still be paid, and is asked' AFTER last_status,
  ADD KEY idx_open (closed_time, created_time);

-- Attempts whose last answer was a close are closed from then on. The rest stay open, so the
-- attempts of orders that an earlier paygw closed on another channel's answer are asked again
-- (a payment found then is PAID_AFTER_CLOSE, an anomaly for a person, instead of lost money).
UPDATE payment_attempt SET closed_time = COALESCE(last_query_at, created_time) WHERE last_answer = 'CLOSED';

-- +goose Down
ALTER TABLE payment_attempt
  DROP KEY idx_open,
  DROP COLUMN closed_time;
