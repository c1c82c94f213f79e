-- The unique-index baseline: what a user would otherwise pick for an exactly
-- deduplicated message log in PostgreSQL. One row per message, uniqueness
-- enforced forever by a unique index on (partition, transactionId hash), and
-- each batch written with INSERT ... ON CONFLICT DO NOTHING.
--
-- Used by bench/suites/pushVsStored.ts through bench/baselines/uniqueIndex.ts,
-- which reads the two sections below (@ddl, @push). Documented in bench/README.md.
--
-- Honesty notes (the baseline is given every advantage the engine has):
--  * the same 16-byte xxh3_128 hash of the transactionId the engine stores;
--  * the same wire trick as queen.log_push_v11: hashes, ids and payloads travel
--    as three concatenated bytea parameters cut in SQL (an array of bytea would
--    travel hex-encoded at twice the size);
--  * no RETURNING: the statement only reports how many rows it inserted, which
--    is less than the engine answers (per-message verdict and the original id
--    of every duplicate); the engine's extra work is not charged to the baseline.

-- @ddl
CREATE SCHEMA IF NOT EXISTS bench_baseline;
CREATE TABLE bench_baseline.messages (
    partition_id bigint      NOT NULL,
    txn_hash     bytea       NOT NULL,
    message_id   uuid        NOT NULL,
    payload      bytea       NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT messages_partition_txn UNIQUE (partition_id, txn_hash)
);

-- @push
-- $1 bigint[] partition id per message; $2 bytea: 16-byte hashes concatenated;
-- $3 bytea: 16-byte message ids concatenated; $4 bytea: payloads concatenated;
-- $5 integer[] payload lengths.
INSERT INTO bench_baseline.messages (partition_id, txn_hash, message_id, payload)
SELECT u.pid,
       substring($2::bytea FROM (u.i::integer - 1) * 16 + 1 FOR 16),
       encode(substring($3::bytea FROM (u.i::integer - 1) * 16 + 1 FOR 16), 'hex')::uuid,
       substring($4::bytea FROM (sum(u.len) OVER (ORDER BY u.i) - u.len + 1)::integer FOR u.len)
FROM unnest($1::bigint[], $5::integer[]) WITH ORDINALITY AS u (pid, len, i)
ON CONFLICT (partition_id, txn_hash) DO NOTHING
