-- SQLite's migration 012 lets a merkle_hashes row hold a run of consecutive
-- hashes. PostgreSQL keeps one hash per row (its one-statement appends check
-- single rows); nothing changes here. The file keeps the two dialects'
-- migration numbers in step.
SELECT 1;
