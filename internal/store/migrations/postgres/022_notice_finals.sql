-- A notice's final rows as one row (SQLite's migration 022 says why; docs/decisions/notifications.md "Rows").
--
-- An in_app row is sent as it is written, an email row of an account
-- without email is failed as it is written, and a webhook row no endpoint
-- takes stays pending: none is ever in an outbox, so none needs a row of
-- its own in notifications — three B-trees each (the table, its id key and
-- (user_id, created_at)) on the one SQLite writer, inside the transaction
-- of the change that causes the notice (a revoke's). Such rows of one
-- notice are stored here as one row, in one B-tree, and expanded per
-- channel when read.
--
-- kinds holds which: 1 in_app sent, 2 email failed, 4 webhook pending. The
-- rows are stamped first, in that order: the k-th row present is created
-- at created_at + k (k from 0). Each row's id is a UUIDv7 whose timestamp
-- and sub-millisecond bits (RFC 9562 §6.2, method 3: the microseconds
-- scaled to 12 bits) are its created_at and whose random bits are salt, so
-- an id names its row without an index of its own. A failed email row can be redelivered: it then moves to
-- notifications with the same id and created_at, and its bit is set in
-- moved. payload is what that email would carry ('' without one).
CREATE TABLE notice_finals (
  user_id    TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  type       TEXT NOT NULL,
  severity   TEXT NOT NULL,
  kinds      INTEGER NOT NULL,
  moved      INTEGER NOT NULL DEFAULT 0,
  salt       BIGINT NOT NULL,
  payload    TEXT NOT NULL,
  PRIMARY KEY (user_id, created_at)
);

-- Every row as the API lists it, for counting: notifications and the final
-- rows expanded (a moved row is counted where it moved to).
CREATE VIEW notification_rows AS
  SELECT user_id, type, channel, severity, delivery_status, created_at, sent_at FROM notifications
  UNION ALL
  SELECT f.user_id, f.type, k.channel, f.severity, k.status,
    f.created_at + (f.kinds & (k.bit - 1) & 1) + ((f.kinds & (k.bit - 1) & 2) >> 1),
    CASE WHEN k.bit = 1 THEN f.created_at END
  FROM notice_finals f
  JOIN (SELECT 1 AS bit, 'in_app' AS channel, 'sent' AS status
        UNION ALL SELECT 2, 'email', 'failed'
        UNION ALL SELECT 4, 'webhook', 'pending') k
    ON (f.kinds & k.bit) <> 0 AND (f.moved & k.bit) = 0;
