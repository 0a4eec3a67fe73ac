-- +goose Up
-- The idempotency table. uk_idem_key is the final defence: it holds when Redis is
-- down, the process restarts or two requests race. scope keeps two clients' keys (or two channels'
-- transaction ids) apart; the binary collation keeps "Key" and "key" apart.
CREATE TABLE idempotent_record (
  id            BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  idem_key      VARCHAR(128)    NOT NULL,
  biz_type      VARCHAR(32)     NOT NULL,
  scope         VARCHAR(64)     NOT NULL,
  request_hash  CHAR(64)        NOT NULL,
  status        TINYINT         NOT NULL DEFAULT 0 COMMENT '0 processing, 1 success, 2 failed',
  result_json   TEXT            NULL,
  response_code SMALLINT        NULL COMMENT 'HTTP status of the stored result',
  lock_token    CHAR(32)        NULL COMMENT 'owner of a processing claim; fences the final update',
  create_time   DATETIME(3)     NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  update_time   DATETIME(3)     NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (id),
  UNIQUE KEY uk_idem_key (idem_key, biz_type, scope),
  KEY idx_status_update (status, update_time)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE idempotent_record;
