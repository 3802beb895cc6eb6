-- Migration 010: what the PostgreSQL append needs (docs/decisions/postgres-append.md).
--
-- auditchain_abort(reason) raises SQLSTATE AC001. The optimistic append runs
-- as one statement without a transaction; when it is refused after its
-- compare-and-set on the chain head (quota spent, event_id taken), calling
-- this function aborts the statement, which rolls back every write it made.
CREATE FUNCTION auditchain_abort(reason text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'auditchain: %', reason USING ERRCODE = 'AC001';
END
$$;

-- listened_until (Unix µs, the database's clock): until when some replica
-- serves a live stream of the account. The append statement sends its NOTIFY
-- only while it is in the future: every notifying commit of the database is
-- serialised on one lock held through its WAL flush, so announcing events
-- nobody listens to capped all appends (docs/decisions/stream.md).
ALTER TABLE chain_heads ADD COLUMN listened_until BIGINT NOT NULL DEFAULT 0;
