-- SQLite's migration 039 moves the keys it builds behind the append (the
-- key by sequence and search's) into tables of their own, so that a row is
-- written once. PostgreSQL has no tail (its appends write their index
-- entries in their statement); nothing changes here. The file keeps the two
-- dialects' migration numbers in step.
SELECT 1;
