-- SQLite's migration 013 names the account of an event and of a Merkle row
-- by a number (account_numbers), in a column called account. PostgreSQL keeps
-- the user_id as the value and only renames the column, so that both dialects
-- share their statements and differ only in the value bound for the account
-- (store/account_numbers.go). Renaming is a catalog change: no row is
-- rewritten, and the indexes and constraints follow the column.
-- The rename takes an exclusive lock on each table: wait for readers (an
-- export, a long search) at most this long, then fail the start-up rather
-- than hold every later query of the record behind the wait.
SET LOCAL lock_timeout = '10s';
ALTER TABLE events RENAME COLUMN user_id TO account;
ALTER TABLE merkle_hashes RENAME COLUMN user_id TO account;
