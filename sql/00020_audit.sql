-- +goose Up
-- The audit trail: one row per write, by HTTP or by a command. Retention never purges it.
--   actor: the API token's name, or cli:<OS user> for a command; role: the role that allowed it.
--   target: what was changed (stock:SKU, order:TRADE_NO, anomaly:ID, ...); before_state and
--   after_state: JSON where the change has a state to show.
CREATE TABLE audit_log (
  id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  at           DATETIME(6)     NOT NULL,
  actor        VARCHAR(80)     NOT NULL,
  role         VARCHAR(32)     NOT NULL,
  action       VARCHAR(64)     NOT NULL,
  target       VARCHAR(191)    NOT NULL,
  request_id   VARCHAR(128)    NOT NULL,
  before_state MEDIUMTEXT      NULL,
  after_state  MEDIUMTEXT      NULL,
  PRIMARY KEY (id),
  KEY audit_target (target, id),
  KEY audit_actor (actor, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE audit_log;
