-- Open event streams, one lease per stream on any replica (docs/decisions/
-- strict-input.md "Streams and keys"): the caps per key and per account hold
-- across replicas. A replica renews its leases while their streams run and
-- deletes each when its stream ends; a replica that vanished leaves leases
-- that lapse at expires_at (unix microseconds).
CREATE TABLE stream_leases (
  lease_id   TEXT PRIMARY KEY,
  user_id    TEXT NOT NULL,
  identity   TEXT NOT NULL,
  replica    TEXT NOT NULL,
  expires_at BIGINT NOT NULL
);
CREATE INDEX stream_leases_user ON stream_leases(user_id, expires_at);
CREATE INDEX stream_leases_replica ON stream_leases(replica);
