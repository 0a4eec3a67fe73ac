-- +goose Up
-- The database's own identity. Redis keys (done markers, guards) carry instance_id and epoch, so
-- two databases never share markers and a database that went back in time (a restore, a failover
-- to a replica that missed commits) gets a new epoch, which no marker written before it matches.
CREATE TABLE db_identity (
  id           TINYINT         NOT NULL,
  instance_id  CHAR(32)        NOT NULL,
  epoch        BIGINT UNSIGNED NOT NULL,
  changed_time DATETIME(3)     NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (id),
  CONSTRAINT ck_db_identity_one_row CHECK (id = 1)
) ENGINE=InnoDB DEFAULT CHARSET=ascii COLLATE=ascii_bin;

INSERT INTO db_identity (id, instance_id, epoch)
  VALUES (1, LEFT(SHA2(CONCAT(UUID(), RAND(), SYSDATE(6), CONNECTION_ID()), 256), 32), 1);

-- +goose Down
DROP TABLE db_identity;
