-- SQLite's migration 037 builds its key (account, sequence) behind the
-- append, as two partial unique indexes. PostgreSQL marks no row (its
-- appends write their index entries in their statement) and keeps its
-- primary key; nothing changes here. The file keeps the two dialects'
-- migration numbers in step.
SELECT 1;
