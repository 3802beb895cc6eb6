-- A notice's rows are written inside the transaction of the change that
-- causes them (a revoke's). Their foreign key to accounts made PostgreSQL
-- lock the account's row (FOR KEY SHARE) in each such transaction: about
-- half of the rows' insert (0.19 of 0.32 ms). Accounts are never deleted, and
-- every row is written for an account the service holds locked (its chain
-- head), so the key checked nothing a write could break. The events, grants
-- and proposals tables have no such key for the same reason.
ALTER TABLE notifications DROP CONSTRAINT notifications_user_id_fkey;
