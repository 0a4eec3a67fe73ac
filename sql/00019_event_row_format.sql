-- +goose Up
-- The sequencer numbers each event after it commits: UPDATE event SET seq = ... for a row whose
-- seq is NULL. In the DYNAMIC row format a NULL takes no room in the record, so the 8 bytes of a
-- seq do not fit where the NULL was: InnoDB writes the record anew (its body included), often
-- reorganising the page, about 3 KB of redo a row, more than the payment's whole transaction.
-- REDUNDANT keeps a fixed-length column's room in the record even while it is NULL, so the
-- update is made in place: about 230 bytes of redo a row (measured; docs/performance.md). The
-- event's own insert writes as much as before. Nothing else changes: same columns, keys and
-- bodies (up to 768 bytes of a BLOB in the record, the rest off page, as DYNAMIC for large ones).
ALTER TABLE event ROW_FORMAT=REDUNDANT;

-- +goose Down
ALTER TABLE event ROW_FORMAT=DYNAMIC;
