-- A once-only notice is marked once, per notice, in a table of its own,
-- instead of by a unique index over its rows, one row per channel (SQLite's
-- migration 021 says why). The rows no longer carry the key.
CREATE TABLE notice_once (
  user_id   TEXT NOT NULL,
  type      TEXT NOT NULL,
  dedup_key TEXT NOT NULL,
  PRIMARY KEY (user_id, type, dedup_key)
);
INSERT INTO notice_once (user_id, type, dedup_key)
  SELECT DISTINCT user_id, type, dedup_key FROM notifications WHERE dedup_key IS NOT NULL;
DROP INDEX notifications_once;
ALTER TABLE notifications DROP COLUMN dedup_key;
