-- PostgreSQL's migration 010 adds the function its optimistic append uses to
-- abort itself. SQLite appends through the group commit's one writer and has
-- no such statement; the file keeps the two dialects' migration numbers in step.
SELECT 1;
