-- The compaction family: building and merging a partition's hash runs
-- (sql/000093), which log_push_v12 reads for rows at or below
-- log_partitions.compacted_upto. Called by the broker's compactor
-- (src/compaction/compactor.ts) for partitions whose pushes probed a long
-- tail; nothing else depends on it running. docs/deduplication.md, "The cold
-- path", has the argument; the invariant every function here keeps:
--
--   every hash of every log_txns row of the partition that ends in
--   (txns_start - 1, compacted_upto] is in some run of the partition;
--   and where a slice has times (created_us, sql/000094), each is the
--   created_at of the row its pair came from.
--
-- Runs are derived data: losing a compaction's commit loses its runs and its
-- compacted_upto together, so each call commits asynchronously.
--
-- Locks: one partition row, taken by the UPDATE of compacted_upto at the end
-- of the transaction that wrote the run (pushes wait on it only for that
-- update, never for the run's reads and writes), and the merged runs' rows.
-- No function here waits for a second partition row, so the global lock
-- order (partition rows in ascending id) cannot be broken.

-- Compacts one partition: at most one merge of p_fanout runs of the lowest
-- level that has that many, the drop of runs wholly below the purge
-- watermark, then a new run from the rows ending in (compacted_upto,
-- last_offset] if at least p_min_tail offsets are there. Returns what it
-- did: hashes put in a new run, hashes rewritten by the merge, runs dropped.
-- The new run comes last because raising compacted_upto locks the partition
-- row until commit: done first, a merge's rewrite would hold up every push
-- to the partition (measured: passes of 0.6 k msg/s instead of 6 k).
--
-- The new run: last_offset is read without a lock, and it is committed, so
-- every row ending at or below it is visible to the statements that follow
-- (READ COMMITTED takes a new snapshot per statement) and none of those rows
-- changes any more (appends go above it; retention only deletes, which a run
-- tolerates). compacted_upto is then raised from the value read to
-- last_offset only if no other compactor raised it meanwhile (else the
-- whole call rolls back: SQLSTATE 40001, retried at the next request).
CREATE OR REPLACE FUNCTION queen.log_compact_v1(p_partition_id bigint, p_min_tail integer, p_fanout integer)
RETURNS TABLE (compacted bigint, merged bigint, dropped integer)
LANGUAGE plpgsql
-- No JIT, as log_push_v12 (push.sql): compiling a statement cost more than it ran.
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v_cmp    bigint;
    v_last   bigint;
    v_start  bigint;
    v_n      bigint;
    v_bits   integer;
    v_run    bigint;
    v_level  integer;
    v_ids    bigint[];
    v_lo     bigint;
    v_hi     bigint;
BEGIN
    IF p_min_tail < 1 OR p_fanout < 2 THEN
        RAISE EXCEPTION 'log_compact_v1: p_min_tail must be >= 1 and p_fanout >= 2' USING ERRCODE = '22023';
    END IF;
    PERFORM set_config('synchronous_commit', 'off', true);
    compacted := 0;
    merged := 0;
    dropped := 0;

    SELECT lp.compacted_upto, lp.last_offset, lp.txns_start INTO v_cmp, v_last, v_start
    FROM queen.log_partitions lp
    WHERE lp.id = p_partition_id;
    IF NOT FOUND THEN
        RETURN NEXT;
        RETURN;
    END IF;

    -- One merge: the oldest p_fanout runs of the lowest level that has as
    -- many. Their rows are locked first; a run another merge took meanwhile
    -- is gone from the locked set, and then nothing is merged. The union is
    -- written as one run, and the merged runs are deleted in the same
    -- transaction, so a reader's statement sees either them or the union.
    -- Every pair is carried over: which offsets a probe still reads is
    -- decided by each candidate's log_txns row, not here.
    SELECT r.level INTO v_level
    FROM queen.log_hash_runs r
    WHERE r.partition_id = p_partition_id
    GROUP BY r.level
    HAVING count(*) >= p_fanout
    ORDER BY r.level
    LIMIT 1;
    IF FOUND THEN
        SELECT array_agg(k.run_id ORDER BY k.run_hi), min(k.run_lo), max(k.run_hi)
        INTO v_ids, v_lo, v_hi
        FROM (
            SELECT r.run_id, r.run_lo, r.run_hi
            FROM queen.log_hash_runs r
            WHERE r.partition_id = p_partition_id AND r.level = v_level
            ORDER BY r.run_hi
            LIMIT p_fanout
            FOR UPDATE
        ) k;
        IF cardinality(v_ids) = p_fanout THEN
            SELECT coalesce(sum(r.n), 0) INTO v_n FROM queen.log_hash_runs r WHERE r.run_id = ANY (v_ids);
            v_bits := LEAST(24, GREATEST(0, ceil(log(2, GREATEST(v_n, 1) / 32.0))::integer));
            INSERT INTO queen.log_hash_runs (partition_id, run_lo, run_hi, bits, n, level)
            VALUES (p_partition_id, v_lo, v_hi, v_bits, v_n, v_level + 1)
            RETURNING run_id INTO v_run;
            -- A slice's times are carried only if every pair of it has one
            -- (a slice of the previous release has none: sql/000094).
            INSERT INTO queen.log_hash_slices (run_id, bucket, hashes, offs, created_us)
            SELECT v_run, queen.log_hash_bucket(x.h, v_bits), string_agg(x.h, ''::bytea ORDER BY x.off), array_agg(x.off ORDER BY x.off),
                   CASE WHEN count(x.at) = count(*) THEN array_agg(x.at ORDER BY x.off) END
            FROM (
                SELECT th.h, s.offs[th.idx + 1] AS off, s.created_us[th.idx + 1] AS at
                FROM queen.log_hash_slices s
                CROSS JOIN LATERAL queen.log_unnest_hashes(s.hashes) th
                WHERE s.run_id = ANY (v_ids)
            ) x
            GROUP BY 1, 2;
            DELETE FROM queen.log_hash_slices s WHERE s.run_id = ANY (v_ids);
            DELETE FROM queen.log_hash_runs r WHERE r.run_id = ANY (v_ids);
            merged := v_n;
        END IF;
    END IF;

    -- Runs built only from rows retention has removed answer nothing any
    -- more (every candidate would fail its log_txns check).
    WITH gone AS (
        DELETE FROM queen.log_hash_runs r
        WHERE r.partition_id = p_partition_id AND r.run_hi < v_start
        RETURNING r.run_id
    ), slices AS (
        DELETE FROM queen.log_hash_slices s USING gone g WHERE s.run_id = g.run_id
    )
    SELECT count(*)::integer INTO dropped FROM gone;
    IF v_last - v_cmp >= p_min_tail THEN
        SELECT coalesce(sum(octet_length(t.hashes) / 16), 0) INTO v_n
        FROM queen.log_txns t
        WHERE t.partition_id = p_partition_id AND t.end_offset > v_cmp AND t.end_offset <= v_last;
        -- About 32 pairs a slice: a slice is one heap tuple of ~1 kB with its times.
        v_bits := LEAST(24, GREATEST(0, ceil(log(2, GREATEST(v_n, 1) / 32.0))::integer));
        v_level := GREATEST(0, floor(log(p_fanout, GREATEST(v_n, 1)::numeric / p_min_tail))::integer);
        -- No rows left there (retention removed them): nothing to hold.
        IF v_n > 0 THEN
            INSERT INTO queen.log_hash_runs (partition_id, run_lo, run_hi, bits, n, level)
            VALUES (p_partition_id, v_cmp, v_last, v_bits, v_n, v_level)
            RETURNING run_id INTO v_run;
            INSERT INTO queen.log_hash_slices (run_id, bucket, hashes, offs, created_us)
            SELECT v_run, x.b, string_agg(x.h, ''::bytea ORDER BY x.off), array_agg(x.off ORDER BY x.off), array_agg(x.at ORDER BY x.off)
            FROM (
                SELECT th.h, t.base_offset + th.idx AS off, queen.log_hash_bucket(th.h, v_bits) AS b,
                       (extract(epoch FROM t.created_at) * 1000000)::bigint AS at
                FROM queen.log_txns t
                CROSS JOIN LATERAL queen.log_unnest_hashes(t.hashes) th
                WHERE t.partition_id = p_partition_id AND t.end_offset > v_cmp AND t.end_offset <= v_last
            ) x
            GROUP BY x.b;
        END IF;
        UPDATE queen.log_partitions lp SET compacted_upto = v_last
        WHERE lp.id = p_partition_id AND lp.compacted_upto = v_cmp;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'log_compact_v1: partition % was compacted concurrently', p_partition_id USING ERRCODE = '40001';
        END IF;
        compacted := v_n;
    END IF;

    RETURN NEXT;
END
$$;
