-- 000093: the cold path's hash runs (docs/deduplication.md, "The cold path").
--
-- A partition's log_txns rows up to log_partitions.compacted_upto are also
-- held here, as runs: each run is the (hash, offset) pairs of a span of
-- rows, cut into slices by the hash's leading `bits` bits (about 32 pairs a
-- slice), so one hash is looked for in one slice per run: one index descent,
-- whatever the window holds. log_txns stays complete and stays the
-- authority: a run only names candidate offsets, and each candidate is
-- verified against its log_txns row (existence, window, the 16 bytes) before
-- it counts. So a run may hold too much (purged or out-of-window offsets) but
-- never too little: every hash of every row ending at or below
-- compacted_upto is in some run (written in the transaction that raised
-- compacted_upto, or carried into the run that merged it).
--
-- compacted_upto: -1 (nothing compacted) or the end_offset of a log_txns
-- row; a probe reads runs for rows ending at or below it and log_txns rows
-- ending above it.
ALTER TABLE queen.log_partitions ADD COLUMN compacted_upto bigint NOT NULL DEFAULT -1;

CREATE TABLE queen.log_hash_runs (
    run_id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    partition_id bigint  NOT NULL,
    -- The rows the run was built from end in (run_lo, run_hi].
    run_lo       bigint  NOT NULL,
    run_hi       bigint  NOT NULL,
    -- Slices are keyed by the hash's leading `bits` bits (0: one slice).
    bits         integer NOT NULL CHECK (bits BETWEEN 0 AND 24),
    n            bigint  NOT NULL,
    -- Size tier: a merge of `fanout` runs of one level makes one of the next.
    level        integer NOT NULL
);
CREATE INDEX log_hash_runs_partition ON queen.log_hash_runs (partition_id, run_hi);

CREATE TABLE queen.log_hash_slices (
    run_id  bigint  NOT NULL,
    bucket  integer NOT NULL,
    -- 16-byte hashes, concatenated, and their offsets, aligned.
    hashes  bytea   NOT NULL,
    offs    bigint[] NOT NULL,
    PRIMARY KEY (run_id, bucket)
);
-- A slice is ~800 bytes: kept in the row, as log_txns hashes are (000033).
ALTER TABLE queen.log_hash_slices ALTER COLUMN hashes SET STORAGE MAIN;
ALTER TABLE queen.log_hash_slices SET (toast_tuple_target = 8160);

-- log_push_v1 was the rolling-upgrade predecessor for brokers built before
-- the function files; those brokers' successors call log_push_v11, which is
-- now the predecessor of log_push_v12 (sql/functions/push.sql).
DROP FUNCTION queen.log_push_v1(bigint[], bigint[], integer[], integer[], bytea, integer[], bytea);
