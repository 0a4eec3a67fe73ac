-- +goose Up
-- Stripe event types reach 44 characters and Checkout Session ids about 66: room for both.
ALTER TABLE notify_journal
  MODIFY channel_status VARCHAR(64)  NOT NULL COMMENT 'the channel''s own word, e.g. TRADE_SUCCESS',
  MODIFY channel_txn_id VARCHAR(128) NOT NULL;
ALTER TABLE anomaly MODIFY channel_txn_id VARCHAR(128) NOT NULL;
-- A refund or cancel names the payment it undoes by the channel's transaction id.
ALTER TABLE orders MODIFY channel_txn_id VARCHAR(128) NULL, ADD KEY idx_channel_txn (channel, channel_txn_id);

-- +goose Down
ALTER TABLE orders DROP KEY idx_channel_txn, MODIFY channel_txn_id VARCHAR(64) NULL;
ALTER TABLE anomaly MODIFY channel_txn_id VARCHAR(64) NOT NULL;
ALTER TABLE notify_journal
  MODIFY channel_status VARCHAR(32) NOT NULL COMMENT 'the channel''s own word, e.g. TRADE_SUCCESS',
  MODIFY channel_txn_id VARCHAR(64) NOT NULL;
