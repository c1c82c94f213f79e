-- 000001: the partitioned message log (schema `queen`).
--
-- Shipped migrations are never edited. A changed function is a new migration
-- that creates the function under a new version suffix (log_push_v2 ...).
--
-- Lock order (global, shared with acks and retention): log_partitions rows in
-- ascending id. Every writer that takes more than one partition row lock takes
-- them in that order.

CREATE SCHEMA IF NOT EXISTS queen;

-- One row per queue. dedup_window_seconds defaults to 3600; only an explicit 0
-- disables the duplicate probe (log_txns is written regardless).
CREATE TABLE queen.queues (
    id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name                 text        NOT NULL UNIQUE,
    dedup_window_seconds integer     NOT NULL DEFAULT 3600 CHECK (dedup_window_seconds >= 0),
    created_at           timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at           timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- One row per (queue, partition name). The row is the per-partition write
-- serializer: its lock is held from probe to allocation.
--
-- last_offset is the allocator (the last offset handed out; -1 when empty).
-- txns_start is the purge watermark: log_txns rows below it are gone.
-- The allocator UPDATE touches only last_offset and last_write_at, neither of
-- which is indexed, and fillfactor leaves room on the page, so the update stays
-- a HOT update (no index maintenance on the hot path).
CREATE TABLE queen.log_partitions (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue_id      bigint      NOT NULL REFERENCES queen.queues (id),
    name          text        NOT NULL,
    last_offset   bigint      NOT NULL DEFAULT -1,
    txns_start    bigint      NOT NULL DEFAULT 0,
    created_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    last_write_at timestamptz,
    CONSTRAINT log_partitions_queue_name UNIQUE (queue_id, name)
) WITH (fillfactor = 50);

-- One row per pushed segment: the frames packed in one blob (format in
-- docs/frame-format.md). Offsets base_offset..end_offset inclusive.
CREATE TABLE queen.log_segments (
    partition_id bigint      NOT NULL,
    base_offset  bigint      NOT NULL,
    end_offset   bigint      NOT NULL,
    created_at   timestamptz NOT NULL,
    blob         bytea       NOT NULL,
    PRIMARY KEY (partition_id, base_offset)
);

-- One row per pushed segment: 16 bytes per frame, in frame order, the
-- xxh3_128 of each frame's transactionId (computed by the broker; SQL never
-- hashes). Written on every push, deduplication on or off, because
-- ack-by-transactionId resolves through it. No index on the hashes: the probe
-- unrolls a partition's in-window rows, located by (partition_id, end_offset).
CREATE TABLE queen.log_txns (
    partition_id bigint      NOT NULL,
    base_offset  bigint      NOT NULL,
    end_offset   bigint      NOT NULL,
    created_at   timestamptz NOT NULL,
    hashes       bytea       NOT NULL,
    PRIMARY KEY (partition_id, end_offset)
);

-- Explodes a hash blob into (idx, h): frame index and its 16-byte hash.
CREATE FUNCTION queen.log_unnest_hashes(p_hashes bytea)
RETURNS TABLE (idx integer, h bytea)
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT i, substring(p_hashes FROM i * 16 + 1 FOR 16)
    FROM generate_series(0, length(p_hashes) / 16 - 1) AS i
$$;
