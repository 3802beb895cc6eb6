-- PostgreSQL's migration 019 drops the notifications' foreign key to
-- accounts, whose check locked the account's row in every transaction that
-- writes a notice. SQLite's check is an index probe without a lock; dropping
-- it would mean rebuilding the table. The file keeps the two dialects'
-- migration numbers in step.
SELECT 1;
