package store

// Reading events by their key (account, sequence). On SQLite that key is
// two partial unique indexes (migration 037): events_sequence holds the rows
// indexed behind the append (index_behind.go), events_unindexed the tail not
// yet indexed. A planner uses a partial index only for a query that implies
// its WHERE, so every read by sequence names each predicate in an arm of its
// own and reads both; an ORDER BY after the two arms merges them (SQLite's
// MERGE of two ordered arms, which stops at a LIMIT). PostgreSQL keeps its
// primary key, which holds every row: one arm.

// bySequence is selection (a SELECT … FROM events) over the rows matching
// cond, which must find them by the key: account = and a condition on
// sequence. An ORDER BY appended to it must name sequence among selection's
// columns (an ORDER BY of a compound SELECT orders by its result columns).
// It is search's two arms (indexedArms) with no search index and the tail
// always read: these reads do not know whether the tail is empty.
func bySequence(dialect Dialect, selection, cond string) string {
	return indexedArms(dialect, selection, cond, false, true)
}

// eventAtSequenceSQL reads the account's event at a sequence.
func eventAtSequenceSQL(dialect Dialect) string {
	return bySequence(dialect, `SELECT `+eventFields+` FROM events`, `account = $1 AND sequence = $2`)
}
