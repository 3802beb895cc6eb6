-- SQLite's migration 009 turns its small per-append tables into WITHOUT ROWID
-- tables (one B-tree instead of two each). PostgreSQL stores tables as heaps
-- with their indexes already; nothing changes here. The file keeps the two
-- dialects' migration numbers in step.
SELECT 1;
