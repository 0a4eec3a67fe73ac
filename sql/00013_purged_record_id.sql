-- +goose Up
-- The largest idempotent_record id the retention purge has seen: raised before each purge
-- deletes anything, and the purge deletes nothing above it. The restore detector compares the
-- markers' high-water mark with the larger of this and MAX(id) (repository.RecordHighWater), which
-- a purge therefore never lowers: emptying the table on a quiet deployment is not a restore. A
-- restore brings back the older value with the older rows, and is still found.
ALTER TABLE db_identity
  ADD COLUMN purged_record_id BIGINT UNSIGNED NOT NULL DEFAULT 0 AFTER epoch;

-- +goose Down
ALTER TABLE db_identity
  DROP COLUMN purged_record_id;
