-- Search by decision (POST /v1/events/search {"decision": …}) walked the
-- account's events newest first and filtered, so a rare decision — "deny"
-- when almost everything is allowed — read the whole chain for one page. With
-- this index a decision page reads only its own rows, like the event_type and
-- tool filters (events_type, events_tool). It costs each append one more
-- B-tree insert; search p99 flat in chain length is the target it buys
-- (docs/performance.md).
CREATE INDEX events_decision ON events(user_id, decision, sequence);
