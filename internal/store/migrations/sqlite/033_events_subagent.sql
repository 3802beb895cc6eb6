-- The console's sub-agent filter (issue #37 "Fast at size"; docs/performance.md
-- "Console at size"): raw's subagent member, indexed in sequence order, so a
-- filtered page reads its matches, not a window of 5,000 rows whose raw is
-- searched and parsed one by one (p99 ~90 ms at 1M events). Built behind the
-- append like search's other indexes (partial on unindexed IS NULL, migration
-- 023), and only over rows whose raw can hold the member: one spelled without
-- escapes, or any escape at all (a member may be spelled with them). Others
-- cost the indexer one instr and nothing else. json_valid guards the parse:
-- raw is stored as valid JSON, but an index expression that raised an error
-- would stop the indexer. store/events_search.go names this predicate and
-- expression exactly, as a planner needs.
CREATE INDEX events_subagent ON events(account,
  (CASE WHEN json_valid(raw) THEN json_extract(raw, '$.subagent') END), sequence)
  WHERE unindexed IS NULL AND (instr(raw, '"subagent"') > 0 OR instr(raw, '\') > 0);
