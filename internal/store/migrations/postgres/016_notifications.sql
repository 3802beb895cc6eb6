-- Notifications and webhooks (CONTRACT.md "Notifications", "Webhooks").

-- One row per notice and channel. The row is what the API lists; it holds no
-- message text. payload is what the email and the webhook push carry (the
-- subject's object ids; for a test notice its body and severity), kept for
-- the outbox and for redelivery, never listed. created_at is unique per
-- account (rows are stamped under the account's lock), so the list's
-- created_at cursor never loses or repeats a row. dedup_key makes a notice
-- once-only (rate.limit_hit per hour; the expiry warnings per object and
-- window). attempts counts mailer sends; digested_at marks a held email
-- row rolled into a digest.
CREATE TABLE notifications (
  id              TEXT PRIMARY KEY,
  user_id         TEXT NOT NULL REFERENCES accounts(user_id),
  type            TEXT NOT NULL,
  channel         TEXT NOT NULL,
  severity        TEXT NOT NULL,
  delivery_status TEXT NOT NULL,
  digest          BOOLEAN NOT NULL,
  created_at      BIGINT NOT NULL,
  sent_at         BIGINT,
  dedup_key       TEXT,
  payload         TEXT NOT NULL,
  attempts        INTEGER NOT NULL DEFAULT 0,
  digested_at     BIGINT
);
CREATE UNIQUE INDEX notifications_user_created ON notifications(user_id, created_at);
CREATE UNIQUE INDEX notifications_once ON notifications(user_id, type, dedup_key, channel) WHERE dedup_key IS NOT NULL;
-- The outboxes: queued email and webhook rows, oldest first.
CREATE INDEX notifications_queued ON notifications(channel, user_id, created_at) WHERE delivery_status = 'queued';
CREATE INDEX notifications_held ON notifications(user_id, created_at) WHERE delivery_status = 'suppressed_digest' AND digested_at IS NULL;

-- Changed preferences only; every other (type, channel) has the default.
CREATE TABLE notification_preferences (
  user_id TEXT NOT NULL REFERENCES accounts(user_id),
  type    TEXT NOT NULL,
  channel TEXT NOT NULL,
  enabled BOOLEAN NOT NULL,
  digest  BOOLEAN NOT NULL,
  PRIMARY KEY (user_id, type, channel)
);

-- Endpoints. The secret signs deliveries (HMAC needs it whole), so it is
-- stored as issued; it is shown once and never listed.
CREATE TABLE webhooks (
  id         TEXT PRIMARY KEY,
  user_id    TEXT NOT NULL REFERENCES accounts(user_id),
  url        TEXT NOT NULL,
  secret     TEXT NOT NULL,
  created_at BIGINT NOT NULL
);
CREATE INDEX webhooks_user ON webhooks(user_id, created_at);

-- What each endpoint subscribes to, one row per type, so a notice asks
-- "does any endpoint of this account take this type" with one index probe.
CREATE TABLE webhook_types (
  webhook_id TEXT NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
  user_id    TEXT NOT NULL,
  type       TEXT NOT NULL,
  PRIMARY KEY (webhook_id, type)
);
CREATE INDEX webhook_types_user ON webhook_types(user_id, type);

-- One row per delivery attempt (GET /v1/webhooks/{id}/deliveries).
CREATE TABLE webhook_deliveries (
  id              BIGSERIAL PRIMARY KEY,
  webhook_id      TEXT NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
  notification_id TEXT NOT NULL,
  attempt         INTEGER NOT NULL,
  status_code     INTEGER,
  error           TEXT,
  duration_us     BIGINT NOT NULL,
  created_at      BIGINT NOT NULL
);
CREATE INDEX webhook_deliveries_hook ON webhook_deliveries(webhook_id, id);
