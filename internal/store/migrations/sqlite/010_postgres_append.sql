-- PostgreSQL's migration 010 adds the function its optimistic append uses to
-- abort itself and the column that says whether an account's events must be
-- announced to other replicas. SQLite appends through one writer in one
-- process and announces in-process; it keeps the column only so that both
-- dialects have the same schema (store/schema_test.go).
ALTER TABLE chain_heads ADD COLUMN listened_until INTEGER NOT NULL DEFAULT 0;
