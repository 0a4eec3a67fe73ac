-- +goose Up
-- The refund ledger: orders.refunded_fen is derived from what the channels stated, never added to.
-- A refund row is one of two kinds:
--   ITEM  one channel refund, keyed by the channel's refund id (or, for a bill line that names
--         none, by that line's key: id_known = 0). amount_fen is the refund's own amount, NULL
--         while no source has stated it (Alipay's and Stripe's notifications state only a running
--         total). bill_key: the id-less bill line that matched it.
--   TOTAL one per payment (refund_id 'total:<txn>'): the largest running total any source stated.
-- For the payment an order holds, refunded_fen = GREATEST(SUM(its APPLIED items), its APPLIED
-- TOTAL). Refunds of a payment not applied yet are PENDING (trade_no '' when the channel names no
-- order), and a payment with any takes the slow path, which counts them in: the refunds_pending
-- counter goes. idx_status_payment finds PENDING rows whose payment has applied since (the query
-- job's sweep).
ALTER TABLE refund
  MODIFY refund_id VARCHAR(200) NOT NULL COMMENT 'the channel''s id of the refund; total:<txn>; or a bill line''s key',
  ADD COLUMN kind ENUM('ITEM','TOTAL') NOT NULL DEFAULT 'ITEM' AFTER refund_id,
  ADD COLUMN id_known TINYINT(1) NOT NULL DEFAULT 1 COMMENT '0: refund_id is a bill line''s key; the bill named no id' AFTER kind,
  ADD COLUMN bill_key VARCHAR(200) NULL COMMENT 'the id-less bill line that matched this refund' AFTER id_known,
  ADD UNIQUE KEY uk_refund_bill_key (channel, bill_key),
  ADD KEY idx_status_payment (status, channel, channel_txn_id);

-- What older rows stated: an amount stays the item's amount; a running total becomes the
-- payment's TOTAL row, and its item keeps no amount of its own.
INSERT INTO refund (channel, refund_id, kind, trade_no, channel_txn_id, stated_fen, stated_total, amount_fen,
    currency, status, created_time)
  SELECT channel, CONCAT('total:', channel_txn_id), 'TOTAL', MAX(trade_no), channel_txn_id, MAX(stated_fen), 1,
    MAX(stated_fen), MAX(currency), MIN(status), MIN(created_time)
  FROM refund WHERE stated_total = 1 AND status <> 'REFUSED' GROUP BY channel, channel_txn_id;
ALTER TABLE refund DROP CONSTRAINT ck_refund_amounts, MODIFY amount_fen BIGINT NULL
  COMMENT 'ITEM: this refund''s own amount (NULL: not stated yet); TOTAL: the largest running total stated';
UPDATE refund SET amount_fen = IF(stated_total = 1, NULL, stated_fen) WHERE kind = 'ITEM';
ALTER TABLE refund
  DROP COLUMN stated_fen,
  DROP COLUMN stated_total,
  ADD CONSTRAINT ck_refund_amount CHECK (amount_fen IS NULL OR amount_fen >= 0);

ALTER TABLE orders DROP CONSTRAINT ck_orders_refunds_pending, DROP COLUMN refunds_pending;

-- +goose Down
ALTER TABLE orders
  ADD COLUMN refunds_pending INT NOT NULL DEFAULT 0 AFTER refunded_fen,
  ADD CONSTRAINT ck_orders_refunds_pending CHECK (refunds_pending >= 0);
ALTER TABLE refund
  DROP CONSTRAINT ck_refund_amount,
  ADD COLUMN stated_fen BIGINT NOT NULL DEFAULT 0 AFTER channel_txn_id,
  ADD COLUMN stated_total TINYINT(1) NOT NULL DEFAULT 0 AFTER stated_fen;
UPDATE refund SET stated_fen = COALESCE(amount_fen, 0), stated_total = (kind = 'TOTAL');
DELETE FROM refund WHERE kind = 'TOTAL';
UPDATE refund SET amount_fen = 0 WHERE amount_fen IS NULL;
ALTER TABLE refund
  MODIFY amount_fen BIGINT NOT NULL DEFAULT 0,
  ADD CONSTRAINT ck_refund_amounts CHECK (stated_fen >= 0 AND amount_fen >= 0),
  DROP KEY uk_refund_bill_key,
  DROP KEY idx_status_payment,
  DROP COLUMN bill_key,
  DROP COLUMN id_known,
  DROP COLUMN kind,
  MODIFY refund_id VARCHAR(128) NOT NULL COMMENT 'the channel''s id of the refund';
