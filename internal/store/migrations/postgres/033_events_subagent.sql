-- The console's sub-agent filter (issue #37 "Fast at size"; docs/performance.md
-- "Console at size"): raw's subagent member, indexed in sequence order, so a
-- filtered page reads its matches, not a window of 5,000 rows whose raw is
-- parsed one by one. Partial like SQLite's (its migration 033): only rows
-- whose raw can hold the member (spelled without escapes, or any escape at
-- all) are parsed, in the append's transaction (PostgreSQL never builds
-- behind). raw is text: as json, a string escape PostgreSQL's text cannot
-- hold (\u0000, a lone surrogate) raises an error, which here would refuse
-- the append, so the member is read by a function that answers NULL
-- instead (only raw with an escape can raise; the others skip the guard and
-- its subtransaction). store/events_search.go names this predicate and
-- expression exactly, as the planner needs.
CREATE FUNCTION raw_subagent(raw text) RETURNS text
  LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  IF strpos(raw, '\') = 0 THEN
    RETURN raw::json ->> 'subagent';
  END IF;
  BEGIN
    RETURN raw::json ->> 'subagent';
  EXCEPTION WHEN others THEN
    RETURN NULL;
  END;
END
$$;
CREATE INDEX events_subagent ON events(account, raw_subagent(raw), sequence)
  WHERE unindexed IS NULL AND (strpos(raw, '"subagent"') > 0 OR strpos(raw, '\') > 0);
