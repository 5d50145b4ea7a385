-- Queries of oncebeat.idempotency, written once for both backends. Parameters are :name.

-- name: idempotency_claim
-- Claim (:client, :key) in the caller's write transaction. No row back: the key was used before (on PostgreSQL
-- a concurrent claim of the same key waits here for the first one's commit or rollback). The answer columns are
-- filled by idempotency_answer before the same transaction commits, so no reader ever sees them empty.
INSERT INTO idempotency_keys (client, key, method, path, fingerprint, status, response, created_at)
VALUES (:client, :key, :method, :path, :fingerprint, 0, '', :now)
ON CONFLICT (client, key) DO NOTHING
RETURNING client;

-- name: idempotency_get
SELECT client, key, method, path, fingerprint, status, response, created_at
FROM idempotency_keys WHERE client = :client AND key = :key;

-- name: idempotency_answer
UPDATE idempotency_keys SET status = :status, response = :response WHERE client = :client AND key = :key;

-- name: idempotency_prune
-- Keys older than :before, at most :limit per call (a bounded delete on the request path).
DELETE FROM idempotency_keys
WHERE (client, key) IN (SELECT client, key FROM idempotency_keys WHERE created_at < :before ORDER BY created_at
                        LIMIT :limit)
RETURNING key;
