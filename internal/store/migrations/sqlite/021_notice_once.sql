-- Fewer and narrower B-trees per notification row: the rows are written on
-- the one SQLite writer, inside the transaction of the change that causes
-- them (a revoke's) or by the thousand (the grant-expiry job), and each
-- B-tree a row goes into costs a seek, a cell and its share of the pages
-- the commit writes to the WAL (docs/performance.md, "Notification rows,
-- third round").
--
-- 1. A once-only notice (CONTRACT.md "Operator jobs": grant.expiring_24h
--    once per grant and expires_at, key warnings once per key and window,
--    rate.limit_hit once per account and hour) is marked once per notice in
--    notice_once, instead of by the partial unique index notifications_once
--    over (user_id, type, dedup_key, channel), one entry per channel row —
--    the widest of the rows' B-trees (~135 bytes an entry). The rows no
--    longer carry the key: nothing lists or reads it from them.
-- 2. The rows' foreign key to accounts goes (PostgreSQL's went in 019): on
--    SQLite it was a probe of accounts for every row on the writer.
--    Accounts are never deleted, and every row is written for an account
--    the writer holds locked.
--
-- Both need the table copied (SQLite's DROP COLUMN would copy it too); it
-- stays a rowid table: a WITHOUT ROWID one keyed by id measured no smaller
-- (its index B-tree splits pages where a rowid table appends) and no faster.
CREATE TABLE notice_once (
  user_id   TEXT NOT NULL,
  type      TEXT NOT NULL,
  dedup_key TEXT NOT NULL,
  PRIMARY KEY (user_id, type, dedup_key)
) WITHOUT ROWID;
INSERT INTO notice_once (user_id, type, dedup_key)
  SELECT DISTINCT user_id, type, dedup_key FROM notifications WHERE dedup_key IS NOT NULL;

CREATE TABLE notifications_new (
  id              TEXT PRIMARY KEY,
  user_id         TEXT NOT NULL,
  type            TEXT NOT NULL,
  channel         TEXT NOT NULL,
  severity        TEXT NOT NULL,
  delivery_status TEXT NOT NULL,
  digest          BOOLEAN NOT NULL,
  created_at      BIGINT NOT NULL,
  sent_at         BIGINT,
  payload         TEXT NOT NULL,
  attempts        INTEGER NOT NULL DEFAULT 0,
  digested_at     BIGINT
);
INSERT INTO notifications_new (id, user_id, type, channel, severity, delivery_status, digest, created_at, sent_at, payload, attempts, digested_at)
  SELECT id, user_id, type, channel, severity, delivery_status, digest, created_at, sent_at, payload, attempts, digested_at FROM notifications;
DROP TABLE notifications;
ALTER TABLE notifications_new RENAME TO notifications;
CREATE UNIQUE INDEX notifications_user_created ON notifications(user_id, created_at);
CREATE INDEX notifications_queued ON notifications(channel, user_id, created_at) WHERE delivery_status = 'queued';
CREATE INDEX notifications_held ON notifications(user_id, created_at) WHERE delivery_status = 'suppressed_digest' AND digested_at IS NULL;
