-- +goose Up
-- Orders in any currency, and orders the merchant already has.
--   stock.currency:           the ISO 4217 code of price_fen (its minor units); an order from the
--                             SKU takes it. Existing rows are CNY, as every order was.
--   orders.merchant_order_id: the merchant's own id for the order, unique per API client
--                             (idem_scope); NULL when the create named none (NULLs never collide).
-- A stockless order (POST /v1/orders without sku) stores sku '' and num 1: the amount is the
-- order's own, and ck_orders_num (num > 0) holds.
ALTER TABLE stock
  ADD COLUMN currency CHAR(3) NOT NULL DEFAULT 'CNY' AFTER price_fen;
ALTER TABLE orders
  ADD COLUMN merchant_order_id VARCHAR(64) NULL AFTER idem_key,
  ADD UNIQUE KEY uk_order_merchant (idem_scope, merchant_order_id);

-- +goose Down
ALTER TABLE orders DROP KEY uk_order_merchant, DROP COLUMN merchant_order_id;
ALTER TABLE stock DROP COLUMN currency;
