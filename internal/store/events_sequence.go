package store

// Reading events by their key (account, sequence). On SQLite the key is two
// tables of their own (migration 039): events_seq holds the rows indexed
// behind the append (index_behind.go), events_tail the tail not yet indexed.
// Every read by sequence reads both, each joined to its rows, in an arm of
// its own; an ORDER BY after the two arms merges them (SQLite's MERGE of two
// ordered arms, which stops at a LIMIT). PostgreSQL keeps its primary key,
// which holds every row: one arm.

// bySequence is a SELECT of columns (of events) over the rows matching
// cond, which must find them by the key: account = and a condition on
// sequence. An ORDER BY appended to it must name sequence among columns (an
// ORDER BY of a compound SELECT orders by its result columns). It is
// search's two arms (indexedArms) through the key by sequence, the tail
// always read: these reads do not know whether the tail is empty.
func bySequence(dialect Dialect, columns, cond string) string {
	return indexedArms(dialect, columns, cond, "", true)
}

// eventAtSequenceSQL reads the account's event at a sequence.
func eventAtSequenceSQL(dialect Dialect) string {
	return bySequence(dialect, eventFields, `account = $1 AND sequence = $2`)
}
