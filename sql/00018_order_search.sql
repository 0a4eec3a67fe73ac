-- +goose Up
-- Order search (GET /v1/orders): customers' complaints come with the user or the merchant's own
-- order id, rarely with our trade_no. Results are newest first, paged by (create_time, id).
--   idx_user_created:   user_id, in create_time order.
--   idx_merchant_order: merchant_order_id across API clients (uk_order_merchant leads with the
--                       client's scope).
--   idx_created:        a created_from/created_to range without a user or a status
--                       (idx_status_create serves a status).
-- None of them changes when an order is paid: the pay path's UPDATE pays nothing for them.
-- A channel transaction id is found through idx_channel_txn (channel, channel_txn_id).
ALTER TABLE orders
  ADD KEY idx_user_created (user_id, create_time),
  ADD KEY idx_merchant_order (merchant_order_id),
  ADD KEY idx_created (create_time);

-- +goose Down
ALTER TABLE orders DROP KEY idx_created, DROP KEY idx_merchant_order, DROP KEY idx_user_created;
