-- +goose Up
CREATE TABLE stock (
  sku         VARCHAR(64) NOT NULL,
  num         INT         NOT NULL,
  price_fen   BIGINT      NOT NULL,
  update_time DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (sku),
  CONSTRAINT ck_stock_num CHECK (num >= 0),
  CONSTRAINT ck_stock_price CHECK (price_fen >= 0)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- uk_order_idem makes a second order for one idempotency key impossible even if
-- idempotent_record were bypassed; orders created with idempotency off leave it NULL.
CREATE TABLE orders (
  id             BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  trade_no       VARCHAR(32)     NOT NULL,
  user_id        BIGINT          NOT NULL,
  sku            VARCHAR(64)     NOT NULL,
  num            INT             NOT NULL,
  amount_fen     BIGINT          NOT NULL,
  currency       CHAR(3)         NOT NULL DEFAULT 'CNY',
  status         ENUM('WAIT_PAY','PAID','CLOSED') NOT NULL DEFAULT 'WAIT_PAY',
  channel        VARCHAR(16)     NULL,
  channel_txn_id VARCHAR(64)     NULL,
  paid_time      DATETIME(3)     NULL,
  idem_scope     VARCHAR(64)     NULL,
  idem_key       VARCHAR(128)    NULL,
  create_time    DATETIME(3)     NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  update_time    DATETIME(3)     NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (id),
  UNIQUE KEY uk_trade_no (trade_no),
  UNIQUE KEY uk_order_idem (idem_scope, idem_key),
  KEY idx_status_create (status, create_time),
  CONSTRAINT ck_orders_num CHECK (num > 0),
  CONSTRAINT ck_orders_amount CHECK (amount_fen >= 0)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE orders;
DROP TABLE stock;
