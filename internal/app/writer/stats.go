package writer

// Stats count what the engines did: the service exports them as metrics.
type Stats struct {
	// OptimisticAppends and LockedAppends count client appends by the path
	// that stored (or refused) them: optimistic (one statement), or locked
	// (events of a machine, and fallbacks). PostgreSQL.
	OptimisticAppends, LockedAppends int64
	// HeadCacheHits counts appends stored against a cached head;
	// HeadCacheStale the cached heads found not to be the account's head
	// (another replica or path had appended) and read again. PostgreSQL.
	HeadCacheHits, HeadCacheStale int64
	// BatchStatements counts the statements sent for optimistic appends and
	// BatchedAppends the appends they carried. PostgreSQL.
	BatchStatements, BatchedAppends int64
	// RememberedHeadHits counts appends stored against a head the writer
	// remembered; RememberedHeadStale the remembered heads the head row did
	// not match, read again (headmemo.go; a defect if ever above 0). SQLite.
	RememberedHeadHits, RememberedHeadStale int64
}

// Stats reports the engine's counters.
func (w *Writer) Stats() Stats {
	if m := w.memo; m != nil {
		return Stats{RememberedHeadHits: m.hits.Load(), RememberedHeadStale: m.stale.Load()}
	}
	o := w.optimistic
	return Stats{
		OptimisticAppends: o.byPath.optimistic.Load(), LockedAppends: o.byPath.locked.Load(),
		HeadCacheHits: o.heads.hits.Load(), HeadCacheStale: o.heads.stale.Load(),
		BatchStatements: o.batch.statements.Load(), BatchedAppends: o.batch.appends.Load(),
	}
}
