-- From this version on, a merkle_hashes row on SQLite may hold a run: up to
-- four consecutive hashes, concatenated, the first at idx (store/merkle_runs_sqlite.go).
-- The rows already stored hold one hash each, a run of one, so nothing is
-- rewritten. The version is here so that an older binary, which reads one hash
-- per row, refuses the database instead of misreading it (store.ErrNewerSchema).
SELECT 1;
