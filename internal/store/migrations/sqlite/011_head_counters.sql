-- The account's daily quota and the machine counter of its events without a
-- machine move into the head row, which every client append already updates:
-- on SQLite each statement of an append costs the single writer more than the
-- row it writes, and a daily_usage upsert and a machine_heads upsert per
-- append were two of about seven (docs/performance.md "Fourth round").
-- quota_used counts the events of quota_day (a UTC day; store/events.go
-- sqliteQuotaUsed says how other days count).
-- PostgreSQL keeps both in daily_usage and machine_heads, which its one-statement
-- append writes anyway; its migration 011 adds these columns only so that both
-- dialects have the same schema (store/schema_test.go).
ALTER TABLE chain_heads ADD COLUMN quota_day TEXT;
ALTER TABLE chain_heads ADD COLUMN quota_used INTEGER NOT NULL DEFAULT 0;
ALTER TABLE chain_heads ADD COLUMN events_without_machine INTEGER NOT NULL DEFAULT 0;
-- Appends create the head row before they charge the quota or count an
-- event, so every account with usage or a counter has one; should one not,
-- it gets an empty head rather than losing its counts.
INSERT INTO chain_heads (user_id, last_sequence, last_hash, last_event_id, event_count)
  SELECT user_id, -1, NULL, NULL, 0 FROM (
    SELECT user_id FROM daily_usage UNION SELECT user_id FROM machine_heads WHERE machine_id = ''
  ) AS counted
  WHERE NOT EXISTS (SELECT 1 FROM chain_heads h WHERE h.user_id = counted.user_id);
-- The day kept is the latest one not after today (by the database's clock);
-- a later one, written while a clock ran ahead, only if there is no other.
UPDATE chain_heads SET quota_day = COALESCE(
    (SELECT max(d.day) FROM daily_usage d WHERE d.user_id = chain_heads.user_id AND d.day <= date('now')),
    (SELECT max(d.day) FROM daily_usage d WHERE d.user_id = chain_heads.user_id));
UPDATE chain_heads SET
  quota_used = COALESCE((SELECT d.used FROM daily_usage d WHERE d.user_id = chain_heads.user_id AND d.day = chain_heads.quota_day), 0),
  events_without_machine = COALESCE((SELECT m.events FROM machine_heads m WHERE m.user_id = chain_heads.user_id AND m.machine_id = ''), 0);
DELETE FROM machine_heads WHERE machine_id = '';
DELETE FROM daily_usage;
