-- +goose Up
-- Webhook delivery: the merchant's endpoints, a fan-out cursor per endpoint and shard, one
-- delivery per event and endpoint, and every attempt made.
--   webhook_endpoint: one row per configured endpoint name, added when a replica first sees it.
--             start_seq is the event seq it was added at: it receives only events after it (no
--             backfill). disabled_time is set by a 410 Gone and cleared by a changed url or an
--             explicit redelivery to it.
--   webhook_cursor: how far shard has fanned events out to endpoint (event.seq). Only the
--             shard's lease holder moves it, by a conditional update, in the transaction that
--             inserts the deliveries: no row is written by every replica.
--   webhook_delivery: status pending | delivered | failed | disabled; next_attempt_at is when a
--             pending one is due. version grows with every change: the bookkeeping of a POST
--             applies only to the version it read (a redelivery in between wins).
--   webhook_attempt: one row per POST; status_code 0 when no answer came.
--   webhook_replica: the replicas running deliveries, each renewing its own row: each takes at
--             most its share of the shards (a ceiling of shards / live replicas).
CREATE TABLE webhook_endpoint (
  name          VARCHAR(64)     NOT NULL,
  url           VARCHAR(2048)   NOT NULL,
  start_seq     BIGINT UNSIGNED NOT NULL,
  disabled_time DATETIME(3)     NULL,
  created_time  DATETIME(3)     NOT NULL,
  PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE webhook_cursor (
  endpoint VARCHAR(64)       NOT NULL,
  shard    SMALLINT UNSIGNED NOT NULL,
  seq      BIGINT UNSIGNED   NOT NULL,
  PRIMARY KEY (endpoint, shard)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE webhook_delivery (
  id              BIGINT UNSIGNED   NOT NULL AUTO_INCREMENT,
  endpoint        VARCHAR(64)       NOT NULL,
  event_id        VARCHAR(40)       NOT NULL,
  seq             BIGINT UNSIGNED   NOT NULL,
  type            VARCHAR(32)       NOT NULL,
  trade_no        VARCHAR(32)       NOT NULL,
  shard           SMALLINT UNSIGNED NOT NULL,
  status          VARCHAR(10)       NOT NULL,
  attempts        INT UNSIGNED      NOT NULL DEFAULT 0,
  version         INT UNSIGNED      NOT NULL DEFAULT 0,
  next_attempt_at DATETIME(3)       NULL,
  event_time      DATETIME(3)       NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_endpoint_event (endpoint, event_id),
  KEY idx_due (shard, endpoint, status, next_attempt_at),
  KEY idx_waiting (shard, status, next_attempt_at),
  KEY idx_order (endpoint, trade_no, status, seq),
  KEY idx_pending (status, endpoint, event_time),
  KEY idx_list (endpoint, status, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE webhook_attempt (
  id          BIGINT UNSIGNED   NOT NULL AUTO_INCREMENT,
  delivery_id BIGINT UNSIGNED   NOT NULL,
  at          DATETIME(3)       NOT NULL,
  status_code SMALLINT UNSIGNED NOT NULL,
  latency_ms  INT UNSIGNED      NOT NULL,
  error       VARCHAR(255)      NOT NULL DEFAULT '',
  PRIMARY KEY (id),
  KEY idx_delivery (delivery_id, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE webhook_replica (
  holder     VARCHAR(64) NOT NULL,
  expires_at DATETIME(3) NOT NULL,
  PRIMARY KEY (holder)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE webhook_replica;
DROP TABLE webhook_attempt;
DROP TABLE webhook_delivery;
DROP TABLE webhook_cursor;
DROP TABLE webhook_endpoint;
