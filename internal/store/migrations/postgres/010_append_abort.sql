-- Migration 010: auditchain_abort(reason) raises SQLSTATE AC001. The
-- optimistic append (store/append_pg.go) runs as one statement without a
-- transaction; when it is refused after its compare-and-set on the chain head
-- (quota spent, event_id taken), calling this function aborts the statement,
-- which rolls back every write it made.
CREATE FUNCTION auditchain_abort(reason text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'auditchain: %', reason USING ERRCODE = 'AC001';
END
$$;
