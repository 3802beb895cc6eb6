package writer

// Stats count what the PostgreSQL engine did (all zero on SQLite): the
// service exports them as metrics.
type Stats struct {
	// OptimisticAppends and LockedAppends count client appends by the path
	// that stored (or refused) them: optimistic (one statement), or locked
	// (events of a machine, and fallbacks).
	OptimisticAppends, LockedAppends int64
	// HeadCacheHits counts appends stored against a cached head;
	// HeadCacheStale the cached heads found not to be the account's head
	// (another replica or path had appended) and read again.
	HeadCacheHits, HeadCacheStale int64
	// BatchStatements counts the statements sent for optimistic appends and
	// BatchedAppends the appends they carried.
	BatchStatements, BatchedAppends int64
}

// Stats reports the engine's counters.
func (w *Writer) Stats() Stats {
	o := w.optimistic
	if o == nil {
		return Stats{}
	}
	return Stats{
		OptimisticAppends: o.byPath.optimistic.Load(), LockedAppends: o.byPath.locked.Load(),
		HeadCacheHits: o.heads.hits.Load(), HeadCacheStale: o.heads.stale.Load(),
		BatchStatements: o.batch.statements.Load(), BatchedAppends: o.batch.appends.Load(),
	}
}
