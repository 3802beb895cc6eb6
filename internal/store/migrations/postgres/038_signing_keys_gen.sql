-- The generation of an account's signing keys on its head row (issue #39:
-- a machine's append read signing_keys twice, once before the write and
-- once under the head's lock, 9 % of the server's CPU under load). Every
-- change of the account's signing_keys bumps it in its transaction, under
-- the head's lock (store.InsertSigningKey), so a generation names one set of
-- keys: an append that holds the head and sees the generation its key was
-- read at knows that key is still the machine's current one, and reads
-- nothing (app/signing_keys.go). It starts at 1, not 0, so that a head
-- built in memory without it (0) reads as "not known" and never as "no key".
ALTER TABLE chain_heads ADD COLUMN signing_keys_gen BIGINT NOT NULL DEFAULT 1;
UPDATE chain_heads SET signing_keys_gen = 2 WHERE user_id IN (SELECT user_id FROM signing_keys);
