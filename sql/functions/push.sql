-- The push family: provisioning and the bundle push, with the helpers the
-- push calls. The design and its argument are in docs/deduplication.md; how
-- this file is applied and when a version may go, in docs/sql-layout.md.
--
-- The claims every push version keeps (the seed's four):
--   1. The log_partitions row lock serialises writers of one partition, and
--      is taken (SELECT ... FOR UPDATE, ascending id) before any probe, so
--      probe-then-allocate is race-free.
--   2. A duplicate writes nothing: no allocator bump, no segment, no
--      log_txns row. No rollback, hence no savepoint; other segments of the
--      bundle commit untouched.
--   3. MIN picks the original occurrence when one hash matches several rows.
--   4. The probed span has two lower bounds: the purge watermark
--      (txns_start - 1) and the broker's vouched watermark (p_verified).
--
-- Live: log_push_v12 (src/engine/logEngine.ts, and the timer fire in
-- src/engine/timerStore.ts), and log_push_looked_v1, which looks a bundle's
-- maybe items up and then calls log_push_v12 in the same round trip. How v11 came to be (v2 ... v10: hints, batched
-- probes, rows of at most 250 frames) is in the numbered migrations that
-- created each version (sql/000004 ... sql/000042) and in docs/history/.
--
-- rolling-upgrade predecessor: queen.log_push_v11
-- Brokers of the release before the cold path push and fire timers through
-- log_push_v11. While such a broker may still run next to new ones,
-- log_push_v11 must exist; a later numbered migration drops it, in the same
-- change that removes it from this file. Both versions lock the partition
-- rows in ascending id and append the same log_txns rows; v11 probes every
-- row of the window in log_txns, v12 the rows above compacted_upto there and
-- the rows at or below it through their runs, which hold every hash of those
-- rows (sql/000093). log_txns stays complete, so a fleet running both stays
-- exact (docs/sql-layout.md).

-- Explodes a hash blob into (idx, h): frame index and its 16-byte hash.
-- Also read by acks by transactionId (src/engine/acks.ts) and browsing by
-- transactionId (src/engine/browse.ts). Not STRICT, on purpose: PostgreSQL
-- inlines a set-returning SQL function into the calling query only if it is
-- not strict, and a call that is not inlined materialises its rows each time
-- (measured ~0.3 ms per call under auto_explain for a 32-hash slice). A NULL
-- blob still gives no rows (generate_series to NULL is empty).
CREATE OR REPLACE FUNCTION queen.log_unnest_hashes(p_hashes bytea)
RETURNS TABLE (idx integer, h bytea)
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT i, substring(p_hashes FROM i * 16 + 1 FOR 16)
    FROM generate_series(0, length(p_hashes) / 16 - 1) AS i
$$;

-- Provisions queues and partitions on first contact and returns their ids and
-- current windows. Runs as its own short transaction, before any push
-- transaction, so a push only ever locks rows that already exist.
--
-- Deadlock freedom: inserts happen in one global order (queue name, then
-- partition name); ON CONFLICT DO NOTHING only waits on a concurrent inserter
-- of the same key, and two provisioners wait on each other's keys in the same
-- order, so no cycle can form. Existing rows are not locked at all.
CREATE OR REPLACE FUNCTION queen.log_provision_v1(p_queues text[], p_partitions text[])
RETURNS TABLE (queue_name text, partition_name text, partition_id bigint, dedup_window_seconds integer)
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
BEGIN
    IF cardinality(p_queues) IS DISTINCT FROM cardinality(p_partitions) THEN
        RAISE EXCEPTION 'log_provision_v1: % queues but % partitions',
            cardinality(p_queues), cardinality(p_partitions) USING ERRCODE = '22023';
    END IF;

    INSERT INTO queen.queues (name)
    SELECT DISTINCT q FROM unnest(p_queues) AS q ORDER BY q
    ON CONFLICT (name) DO NOTHING;

    INSERT INTO queen.log_partitions (queue_id, name)
    SELECT DISTINCT qu.id, x.p
    FROM unnest(p_queues, p_partitions) AS x (q, p)
    JOIN queen.queues qu ON qu.name = x.q
    ORDER BY qu.id, x.p
    ON CONFLICT (queue_id, name) DO NOTHING;

    -- Each pair's row is read through the (queue_id, name) key, a probe per
    -- pair, never a join: while a burst of first contacts fills the table,
    -- its statistics still say a queue has a few partitions, and a join
    -- planned on them scanned all of a queue's partitions once per pair
    -- (100 k new partitions in calls of 1 000: 0.8 s a call, 10 s in all).
    RETURN QUERY
    SELECT qu.name, x.p, lp.id, qu.dedup_window_seconds
    FROM (SELECT DISTINCT u.q, u.p FROM unnest(p_queues, p_partitions) AS u (q, p)) x
    JOIN queen.queues qu ON qu.name = x.q
    CROSS JOIN LATERAL (
        SELECT l.id
        FROM queen.log_partitions l
        WHERE l.queue_id = qu.id AND l.name = x.p
        LIMIT 1
    ) lp;
END
$$;

-- Verifies hinted occurrences positionally. A run (item i, offset o, length
-- L) names items i .. i+L-1 of p_hashes at offsets o .. o+L-1 (a replay of a
-- stored segment arrives as one run, a scattered retry as runs of length 1).
-- Returns (idx, off) for every named occurrence that is really there: its
-- log_txns row exists, ends at or above the purge watermark (the rows the
-- full probe would read), is inside the window (created_at >= p_cutoff) and
-- holds the item's 16 bytes at that offset. A run of length 1 (a retry)
-- reads the row holding `off` (the first row ending at or above it), which
-- must start at or below it. A longer run reads the rows overlapping its
-- span; a span compared whole saves the per-item compare, a span that
-- differs (a cache that is wrong somewhere) falls back to per item.
CREATE OR REPLACE FUNCTION queen.log_verify_runs_v2(
    p_partition_id bigint,
    p_cutoff       timestamptz,
    p_txns_start   bigint,
    p_hashes       bytea,
    p_items        integer[],
    p_offsets      bigint[],
    p_lens         integer[])
RETURNS TABLE (idx integer, off bigint)
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT r.item, r.off
    FROM unnest(p_items, p_offsets, p_lens) AS r (item, off, len)
    CROSS JOIN LATERAL (
        SELECT t.base_offset, t.end_offset, t.created_at, t.hashes
        FROM queen.log_txns t
        WHERE t.partition_id = p_partition_id
          AND t.end_offset >= r.off
        ORDER BY t.end_offset
        LIMIT 1
    ) t
    WHERE r.len = 1
      AND t.base_offset <= r.off
      AND t.end_offset >= p_txns_start
      AND t.created_at >= p_cutoff
      AND substring(t.hashes FROM ((r.off - t.base_offset) * 16 + 1)::integer FOR 16)
          = substring(p_hashes FROM (r.item * 16 + 1) FOR 16);
    IF EXISTS (SELECT 1 FROM unnest(p_lens) AS l WHERE l > 1) THEN
        -- v1's span check for runs of two or more, with one change: `judged`
        -- is MATERIALIZED. Inlined (as v1's is), the whole-span compare sat
        -- in an OR with a per-offset term and was evaluated, span slice and
        -- all, once per generated offset: O(L^2) bytes for a run of L.
        RETURN QUERY
        WITH pieces AS (
            SELECT r.item, r.off AS run_off, t.base_offset, t.hashes,
                   GREATEST(r.off, t.base_offset) AS lo,
                   LEAST(r.off + r.len - 1, t.end_offset) AS hi
            FROM unnest(p_items, p_offsets, p_lens) AS r (item, off, len)
            CROSS JOIN LATERAL (
                SELECT t.base_offset, t.end_offset, t.created_at, t.hashes
                FROM queen.log_txns t
                WHERE t.partition_id = p_partition_id
                  AND t.end_offset >= r.off
                  AND t.end_offset <= coalesce((SELECT min(x.end_offset) FROM queen.log_txns x
                                                WHERE x.partition_id = p_partition_id
                                                  AND x.end_offset >= r.off + r.len - 1),
                                               r.off + r.len - 1)
                ORDER BY t.end_offset
                LIMIT r.len
            ) t
            WHERE r.len > 1
              AND t.base_offset <= r.off + r.len - 1
              AND t.end_offset >= p_txns_start
              AND t.created_at >= p_cutoff
        ), judged AS MATERIALIZED (
            SELECT p.*,
                   substring(p.hashes FROM ((p.lo - p.base_offset) * 16 + 1)::integer FOR ((p.hi - p.lo + 1) * 16)::integer)
                     = substring(p_hashes FROM ((p.item + p.lo - p.run_off) * 16 + 1)::integer FOR ((p.hi - p.lo + 1) * 16)::integer) AS whole
            FROM pieces p
        )
        SELECT (j.item + (g.o - j.run_off))::integer, g.o
        FROM judged j
        CROSS JOIN LATERAL generate_series(j.lo, j.hi) AS g (o)
        WHERE j.whole
           OR substring(j.hashes FROM ((g.o - j.base_offset) * 16 + 1)::integer FOR 16)
              = substring(p_hashes FROM ((j.item + g.o - j.run_off) * 16 + 1)::integer FOR 16);
    END IF;
END
$$;

-- The probe of a partition's rows ending above p_from and inside the window:
-- (idx, MIN offset) for every item of p_hashes stored there. Same rows, same
-- answer as v1's probe; two ways to compute it, chosen by the item count:
--  * few items (<= 32: a suppressed, cold or gapped partition's small
--    segment): per (item, row) one native byte search, position(), over the
--    row's hash blob. Measured ~10x cheaper than unrolling every stored hash
--    into a row for 10 items against 10 k-150 k stored hashes. The first
--    match in a row is its lowest offset when it is 16-byte aligned; a
--    misaligned first match (bytes spanning two hashes) falls back to
--    unrolling that one row, so the answer stays exact.
--  * many items: v1's unroll-and-hash-join, whose cost does not grow with
--    the item count.
CREATE OR REPLACE FUNCTION queen.log_probe_tail_v1(p_partition_id bigint, p_from bigint, p_cutoff timestamptz, p_hashes bytea)
RETURNS TABLE (idx integer, off bigint)
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_column
BEGIN
    IF length(p_hashes) <= 32 * 16 THEN
        RETURN QUERY
        SELECT c.idx, MIN(x.off)
        FROM (
            SELECT ih.idx, ih.h, t.base_offset, t.hashes, position(ih.h IN t.hashes) AS pos
            FROM queen.log_unnest_hashes(p_hashes) ih
            JOIN queen.log_txns t
              ON t.partition_id = p_partition_id AND t.end_offset > p_from AND t.created_at >= p_cutoff
            OFFSET 0
        ) c
        CROSS JOIN LATERAL (
            SELECT c.base_offset + (c.pos - 1) / 16 AS off
            WHERE (c.pos - 1) % 16 = 0
            UNION ALL
            SELECT c.base_offset + th.idx
            FROM queen.log_unnest_hashes(c.hashes) th
            WHERE (c.pos - 1) % 16 <> 0 AND th.h = c.h
        ) x
        WHERE c.pos > 0
        GROUP BY c.idx;
    ELSE
        RETURN QUERY
        SELECT ih.idx, MIN(t.base_offset + th.idx)
        FROM queen.log_txns t
        CROSS JOIN LATERAL queen.log_unnest_hashes(t.hashes) th
        JOIN queen.log_unnest_hashes(p_hashes) ih ON ih.h = th.h
        WHERE t.partition_id = p_partition_id AND t.end_offset > p_from AND t.created_at >= p_cutoff
        GROUP BY ih.idx;
    END IF;
END
$$;

-- The slice a hash falls in within a run of `bits` bits (sql/000093): the
-- hash's leading bits, read big-endian (xxh3's bytes are uniform). Not
-- STRICT, so that PostgreSQL inlines it (a STRICT SQL function whose body is
-- a CASE is called through the SQL function executor, ~0.1 ms a call).
CREATE OR REPLACE FUNCTION queen.log_hash_bucket(p_h bytea, p_bits integer)
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN p_bits = 0 THEN 0
                ELSE (((get_byte(p_h, 0)::bigint << 24) | (get_byte(p_h, 1)::bigint << 16)
                       | (get_byte(p_h, 2)::bigint << 8) | get_byte(p_h, 3)::bigint) >> (32 - p_bits))::integer
           END
$$;

-- Pushes one bundle: log_push_v11's arguments, result and verdicts, with the
-- cold path (docs/deduplication.md, "The cold path"). A probed segment reads
-- log_txns only for rows ending above max(lower bound, compacted_upto), the
-- tail, and the runs (sql/000093) for the compacted rows above the lower
-- bound: one slice per (item, run), each named offset verified against its
-- log_txns row. So a probe's cost grows with the items pushed, the runs'
-- count and the tail, not with the window. Probed segments of more than 32
-- items without hints are probed together in one statement (the joined
-- probe: v11's per-segment hash join, for all of them at once). Everything
-- else is v11's: the pre-lock, the hinted verdicts, the batched probe (over
-- the tail), the id resolution and the appends. compacted_upto is read under the row lock, and
-- the compactor raises it only under the same lock (log_compact_v1), so the
-- split between runs and tail cannot move during the push.
--
-- Pushes one bundle. Segment i goes to partition p_partition_ids[i]
-- (distinct within a bundle); the broker vouches p_verified[i] (-1: cannot
-- vouch) under a window of p_windows[i] seconds. Its hashes (p_counts[i] +
-- p_expected[i] of them, 16 bytes each) and its blob (the p_counts[i]
-- presumed-new frames only) arrive concatenated in p_hashes / p_blobs. The
-- first p_counts[i] hashes are the frames' (item k = frame k); the next
-- p_expected[i] are the hinted items, which have no frame in the blob.
-- p_run_counts[i] runs of (p_run_items, p_run_offsets, p_run_lens) name the
-- hinted occurrences, item indexes within the segment.
--
-- One row per segment, in input order:
--   assigned_base  first offset of the appended frames, or NULL (nothing written);
--   probed         whether the tail probe ran; probe_hashes = stored hashes it read;
--   hint_offsets   named offsets checked positionally;
--   dup_idx/dup_offsets/dup_ids  every duplicate item, its original (MIN)
--                  offset and id (16 bytes each in dup_ids; all-zero when
--                  retention removed the original segment);
--   refuted_idx    hinted items that are NOT duplicates (a stale hint): the
--                  segment was not written, the broker re-submits them as frames.
-- Appended iff no frame item is a duplicate and every hinted item is one.
--
-- Shape: one statement locks every partition row of the bundle in ascending
-- id (the global lock order) before any check; the hinted verdicts and the
-- probes of small unhinted segments run as one statement each per push;
-- larger probed segments take the per-segment path (log_verify_runs_v2 and
-- log_probe_tail_v1); the appends are three set-based statements under the
-- locks, writing log_txns in rows of at most 250 frames (TXNS_ROW_FRAMES),
-- each with its slice of the id directory. Rows written by older versions
-- (one row per segment, no id copy) are read exactly as well: a lookup that
-- finds no row within 250 offsets takes the far lookup, an id without a
-- copy is read from the segment's blob.
--
-- A timer fire calls it with p_verified = the partition's own watermark,
-- read under the row lock it holds, so no probe runs (docs/timers.md).
CREATE OR REPLACE FUNCTION queen.log_push_v12(
    p_partition_ids bigint[],
    p_verified      bigint[],
    p_windows       integer[],
    p_counts        integer[],
    p_expected      integer[],
    p_hashes        bytea,
    p_blob_lens     integer[],
    p_blobs         bytea,
    p_run_counts    integer[],
    p_run_items     integer[],
    p_run_offsets   bigint[],
    p_run_lens      integer[])
RETURNS TABLE (
    seg_index      integer,
    assigned_base  bigint,
    window_seconds integer,
    probed         boolean,
    probe_hashes   bigint,
    hint_offsets   integer,
    dup_idx        integer[],
    dup_offsets    bigint[],
    dup_ids        bytea,
    refuted_idx    integer[])
-- No JIT: the planner's row guesses for unnest and generate_series put the
-- runs lookup's cost past jit_optimize_above_cost, and PostgreSQL then
-- compiled it with LLVM on every call (auto_explain: ~0.5 s of a 0.53 s
-- statement, "JIT: Functions: 57, Optimization true"). Every statement here
-- touches a bounded number of rows; none gains from compilation.
LANGUAGE plpgsql
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v_n          integer := coalesce(cardinality(p_partition_ids), 0);
    v_runs_total integer := coalesce(cardinality(p_run_items), 0);
    v_i          integer;
    v_locked     integer;
    v_distinct   integer;
    -- The partitions' state, in the bundle's order (index = segment).
    v_lasts      bigint[];
    v_starts     bigint[];
    v_wins       integer[];
    v_lstarts    bigint[];
    v_cmps       bigint[];
    v_last       bigint;
    v_window     integer;
    v_verified   bigint;
    v_now        timestamptz;
    v_count      integer;
    v_expected   integer;
    v_items      integer;
    v_hashes     bytea;
    v_run_cnt    integer;
    v_bad        integer;
    v_new_dups   integer;
    v_hint_dups  integer;
    v_ids_done   boolean;
    v_any_hinted boolean := false;
    v_hash_pos   integer := 1;
    v_blob_pos   integer := 1;
    v_run_pos    integer := 1;
    -- Per segment, from the first pass.
    v_hash_at    integer[] := array_fill(0, ARRAY[v_n]);
    v_blob_at    integer[] := array_fill(0, ARRAY[v_n]);
    v_run_at     integer[] := array_fill(0, ARRAY[v_n]);
    v_froms      bigint[] := array_fill(NULL::bigint, ARRAY[v_n]);
    -- The tail's lower bound: above the compacted rows, which the runs answer.
    v_tfroms     bigint[] := array_fill(NULL::bigint, ARRAY[v_n]);
    v_runs_need  boolean[] := array_fill(false, ARRAY[v_n]);
    v_any_runs   boolean := false;
    -- The runs' verified occurrences: (segment, item, MIN offset), by segment.
    v_rh_seg     integer[];
    v_rh_idx     integer[];
    v_rh_off     bigint[];
    v_cutoffs    timestamptz[] := array_fill(NULL::timestamptz, ARRAY[v_n]);
    v_probed     boolean[] := array_fill(false, ARRAY[v_n]);
    v_hinted     boolean[] := array_fill(false, ARRAY[v_n]);
    v_base       bigint[] := array_fill(NULL::bigint, ARRAY[v_n]);
    v_run_seg    integer[];
    v_hint_lens  integer[];
    -- The longest hint run of the push (0 without runs).
    v_max_len    integer := 0;
    -- The batched hinted verdict, read one segment's group at a time: the
    -- segment, its items found (aligned arrays, in the DISTINCT ON's order), their original offsets and ids,
    -- and how many of them are frames (item < count).
    v_hinted_cur refcursor;
    v_h_seg      integer;
    v_h_idx      integer[];
    v_h_off      bigint[];
    v_h_ids      bytea;
    v_h_new      integer;
    -- The batched probe (see the header), read one segment at a time.
    v_batched    boolean[] := array_fill(false, ARRAY[v_n]);
    v_any_batched boolean := false;
    v_probe_cur  refcursor;
    -- The joined probe: probed segments of many items and no hints, all in
    -- one statement (tail hash join and runs hits), read a segment at a time.
    v_joined     boolean[] := array_fill(false, ARRAY[v_n]);
    v_any_joined boolean := false;
    v_join_cur   refcursor;
    v_j_seg      integer;
    v_j_n        bigint;
    v_j_idx      integer[];
    v_j_off      bigint[];
    v_p_seg      integer;
    v_p_n        bigint;
    v_p_idx      integer[];
    v_p_off      bigint[];
BEGIN
    IF coalesce(cardinality(p_verified), 0) <> v_n
       OR coalesce(cardinality(p_windows), 0) <> v_n
       OR coalesce(cardinality(p_counts), 0) <> v_n
       OR coalesce(cardinality(p_expected), 0) <> v_n
       OR coalesce(cardinality(p_blob_lens), 0) <> v_n
       OR coalesce(cardinality(p_run_counts), 0) <> v_n
       OR coalesce(cardinality(p_run_offsets), 0) <> v_runs_total
       OR coalesce(cardinality(p_run_lens), 0) <> v_runs_total THEN
        RAISE EXCEPTION 'log_push_v12: argument arrays differ in length' USING ERRCODE = '22023';
    END IF;
    IF v_n = 0 THEN
        RETURN;
    END IF;

    -- The bundle pre-lock: every partition row, ascending id, before any
    -- check (the one global lock order; LockRows runs above the sort), its
    -- state then aggregated in the bundle's order.
    SELECT array_agg(s.last_offset ORDER BY s.ord), array_agg(s.txns_start ORDER BY s.ord),
           array_agg(s.win ORDER BY s.ord), array_agg(s.log_start ORDER BY s.ord), array_agg(s.compacted_upto ORDER BY s.ord),
           count(*), count(DISTINCT s.id)
    INTO v_lasts, v_starts, v_wins, v_lstarts, v_cmps, v_locked, v_distinct
    FROM (
        SELECT lp.id, lp.last_offset, lp.txns_start, lp.log_start, lp.compacted_upto, qu.dedup_window_seconds AS win, u.ord
        FROM queen.log_partitions lp
        JOIN queen.queues qu ON qu.id = lp.queue_id
        JOIN unnest(p_partition_ids) WITH ORDINALITY AS u (id, ord) ON u.id = lp.id
        ORDER BY lp.id
        FOR UPDATE OF lp
    ) s;
    -- A partition named twice joins its row twice (v_distinct < v_locked);
    -- an unknown one joins none (v_locked < v_n).
    IF v_locked <> v_n OR v_distinct <> v_n THEN
        IF (SELECT count(DISTINCT x) FROM unnest(p_partition_ids) AS x) <> v_n THEN
            RAISE EXCEPTION 'log_push_v12: a bundle names a partition twice' USING ERRCODE = '22023';
        END IF;
        RAISE EXCEPTION 'log_push_v12: unknown partition id in bundle' USING ERRCODE = 'P0002';
    END IF;

    v_now := clock_timestamp();

    -- First pass, no statements: frame counts, run counts, positions, and
    -- which check each segment needs (v4's conditions, per segment).
    FOR v_i IN 1 .. v_n LOOP
        v_last := v_lasts[v_i];
        v_window := v_wins[v_i];
        v_count := p_counts[v_i];
        v_expected := p_expected[v_i];
        v_run_cnt := p_run_counts[v_i];
        IF v_count IS NULL OR v_expected IS NULL OR v_count < 0 OR v_expected < 0 OR v_count + v_expected < 1
           OR v_hash_pos + (v_count + v_expected) * 16 - 1 > length(p_hashes)
           OR (v_count = 0 AND p_blob_lens[v_i] <> 0) THEN
            RAISE EXCEPTION 'log_push_v12: segment % has a malformed frame count', v_i - 1 USING ERRCODE = '22023';
        END IF;
        IF v_run_cnt IS NULL OR v_run_cnt < 0 OR v_run_pos + v_run_cnt - 1 > v_runs_total THEN
            RAISE EXCEPTION 'log_push_v12: segment % has malformed hint runs', v_i - 1 USING ERRCODE = '22023';
        END IF;
        v_hash_at[v_i] := v_hash_pos;
        v_blob_at[v_i] := v_blob_pos;
        v_run_at[v_i] := v_run_pos;
        v_hash_pos := v_hash_pos + (v_count + v_expected) * 16;
        v_blob_pos := v_blob_pos + p_blob_lens[v_i];
        v_run_pos := v_run_pos + v_run_cnt;
        -- Each run's segment number, aligned with p_run_items.
        IF v_run_cnt > 0 THEN
            v_run_seg := v_run_seg || array_fill(v_i, ARRAY[v_run_cnt]);
        END IF;

        v_verified := coalesce(p_verified[v_i], -1);
        -- As in v1: a watermark above the allocator vouches for offsets that
        -- do not exist, and one vouched under a smaller window than the queue
        -- now has does not cover the older hashes: neither can be trusted.
        IF v_verified > v_last OR v_window > coalesce(p_windows[v_i], 0) THEN
            v_verified := -1;
        END IF;
        v_froms[v_i] := GREATEST(v_verified, v_starts[v_i] - 1);
        -- Rows ending in (from, compacted_upto] are answered by the runs,
        -- rows ending above both by the tail probe: together, every row the
        -- probe of v11 reads (compacted_upto is a row's end, never inside one).
        v_tfroms[v_i] := GREATEST(v_froms[v_i], v_cmps[v_i]);
        v_cutoffs[v_i] := v_now - make_interval(secs => v_window);
        v_probed[v_i] := v_window > 0 AND v_last > v_froms[v_i];
        v_hinted[v_i] := v_window > 0 AND NOT v_probed[v_i] AND v_run_cnt > 0;
        v_any_hinted := v_any_hinted OR v_hinted[v_i];
        v_runs_need[v_i] := v_probed[v_i] AND v_cmps[v_i] > v_froms[v_i];
        v_any_runs := v_any_runs OR v_runs_need[v_i];
        v_batched[v_i] := v_probed[v_i] AND v_run_cnt = 0 AND v_expected = 0 AND v_count <= 32;
        v_any_batched := v_any_batched OR v_batched[v_i];
        -- Only over a short tail (a compacted partition's): a long one,
        -- joined for every segment at once, spills the statement's hash to
        -- disk and holds up the whole bundle (measured: pushes of 8 s in
        -- temp-file writes); there the per-segment path stays.
        v_joined[v_i] := v_probed[v_i] AND v_run_cnt = 0 AND v_expected = 0 AND NOT v_batched[v_i]
                         AND v_last - v_tfroms[v_i] <= 4096;
        v_any_joined := v_any_joined OR v_joined[v_i];
    END LOOP;
    IF v_run_pos - 1 <> v_runs_total THEN
        RAISE EXCEPTION 'log_push_v12: % hint runs belong to no segment', v_runs_total - (v_run_pos - 1) USING ERRCODE = '22023';
    END IF;

    v_hint_lens := array_fill(0, ARRAY[v_n]);
    IF v_runs_total > 0 THEN
        -- v4's run check for all runs in one scan (the first segment with
        -- a malformed run is named), and the longest run.
        SELECT min(r.seg) FILTER (WHERE r.item IS NULL OR r.len IS NULL OR r.len < 1
                                     OR r.item < p_counts[r.seg] OR r.item + r.len > p_counts[r.seg] + p_expected[r.seg]),
               max(r.len)
        INTO v_bad, v_max_len
        FROM unnest(v_run_seg, p_run_items, p_run_lens) AS r (seg, item, len);
        IF v_bad IS NOT NULL THEN
            RAISE EXCEPTION 'log_push_v12: segment % has malformed hint runs', v_bad - 1 USING ERRCODE = '22023';
        END IF;
        -- A run of one names one offset: the hint size is the run count.
        IF v_max_len = 1 THEN
            v_hint_lens := p_run_counts;
        ELSE
            SELECT array_agg(coalesce(h.total, 0)::integer ORDER BY g.seg)
            INTO v_hint_lens
            FROM generate_series(1, v_n) AS g (seg)
            LEFT JOIN (SELECT r.seg, sum(r.len) AS total FROM unnest(v_run_seg, p_run_lens) AS r (seg, len) GROUP BY r.seg) h ON h.seg = g.seg;
        END IF;
    END IF;

    IF v_any_hinted AND v_max_len = 1 THEN
        -- Every run is a run of one (scattered retries, the common case):
        -- the statement below without its branch for longer runs, which
        -- would find no rows. PostgreSQL plans both afresh on every call
        -- (custom plans: see the header), and planning the longer-run
        -- branch (and starting it) cost ~2 ms per push.
        OPEN v_hinted_cur FOR
        SELECT d.seg,
               array_agg(d.idx),
               array_agg(d.off),
               string_agg(coalesce(d.id, '\x00000000000000000000000000000000'::bytea), ''::bytea),
               (count(*) FILTER (WHERE d.idx < p_counts[d.seg]))::integer
        FROM (
            -- v4's id, as v9 computed it: the verifying row's copy of the
            -- directory if its segment still exists (base_offset >=
            -- log_start, v7), the all-zero id if retention removed it, the
            -- blob's directory for rows from before 000030 (no copy). For a
            -- run whose near lookup found no row, the same from the far
            -- lookup's row (see the header).
            SELECT DISTINCT ON (r.seg, r.item) r.seg::integer AS seg, r.item AS idx, r.off,
                   CASE WHEN t.base_offset IS NOT NULL THEN
                          CASE WHEN t.id IS NOT NULL THEN
                                 CASE WHEN t.base_offset >= v_lstarts[r.seg] THEN t.id END
                               ELSE (SELECT CASE WHEN ls.end_offset >= r.off
                                                    THEN substring(ls.blob FROM (6 + (r.off - ls.base_offset) * 16)::integer FOR 16) END
                                        FROM queen.log_segments ls
                                        WHERE ls.partition_id = p_partition_ids[r.seg] AND ls.base_offset <= r.off
                                        ORDER BY ls.base_offset DESC
                                        LIMIT 1)
                          END
                        ELSE (SELECT CASE WHEN f.ids IS NOT NULL THEN
                                            CASE WHEN f.base_offset >= v_lstarts[r.seg]
                                                 THEN substring(f.ids FROM ((r.off - f.base_offset) * 16 + 1)::integer FOR 16) END
                                          ELSE (SELECT CASE WHEN ls.end_offset >= r.off
                                                    THEN substring(ls.blob FROM (6 + (r.off - ls.base_offset) * 16)::integer FOR 16) END
                                        FROM queen.log_segments ls
                                        WHERE ls.partition_id = p_partition_ids[r.seg] AND ls.base_offset <= r.off
                                        ORDER BY ls.base_offset DESC
                                        LIMIT 1)
                                     END
                              FROM queen.log_txns f
                              WHERE f.partition_id = p_partition_ids[r.seg]
                                AND f.end_offset > r.off + 249
                              ORDER BY f.end_offset
                              LIMIT 1)
                   END AS id
            FROM unnest(v_run_seg, p_run_items, p_run_offsets) AS r (seg, item, off)
            LEFT JOIN LATERAL (
                -- The near lookup: the first row of the partition ending in
                -- [off, off + 249], and its 16 bytes at the named offset
                -- (v6's slicing: carrying the row's whole hashes and id copy
                -- out of the scan copied ~6 kB per duplicate). The CASE
                -- keeps an offset below the row's base (a purged range)
                -- from computing a position at all.
                SELECT t.base_offset, t.end_offset, t.created_at,
                       CASE WHEN t.base_offset <= r.off
                            THEN substring(t.hashes FROM ((r.off - t.base_offset) * 16 + 1)::integer FOR 16) END AS hash,
                       CASE WHEN t.base_offset <= r.off
                            THEN substring(t.ids FROM ((r.off - t.base_offset) * 16 + 1)::integer FOR 16) END AS id
                FROM queen.log_txns t
                WHERE t.partition_id = p_partition_ids[r.seg]
                  AND t.end_offset >= r.off
                  AND t.end_offset <= r.off + 249
                ORDER BY t.end_offset
                LIMIT 1
            ) t ON true
            WHERE v_hinted[r.seg]
              AND CASE WHEN t.base_offset IS NOT NULL THEN
                         t.base_offset <= r.off
                         AND t.end_offset >= v_starts[r.seg]
                         AND t.created_at >= v_cutoffs[r.seg]
                         AND t.hash = substring(p_hashes FROM v_hash_at[r.seg] + r.item * 16 FOR 16)
                       ELSE coalesce((
                         -- The far lookup, only for a run the near one found
                         -- no row for: the first row ending above off + 249,
                         -- with v10's checks on it (no row: not verified).
                         -- It is written twice (here and for the id above)
                         -- on purpose: as one more LEFT JOIN LATERAL, its
                         -- join level cost every run what the bound saved
                         -- (docs/deduplication.md, "log_push_v12"), while
                         -- here both copies run only for the rare run.
                         SELECT f.base_offset <= r.off
                                AND f.end_offset >= v_starts[r.seg]
                                AND f.created_at >= v_cutoffs[r.seg]
                                AND CASE WHEN f.base_offset <= r.off
                                         THEN substring(f.hashes FROM ((r.off - f.base_offset) * 16 + 1)::integer FOR 16) END
                                    = substring(p_hashes FROM v_hash_at[r.seg] + r.item * 16 FOR 16)
                         FROM queen.log_txns f
                         WHERE f.partition_id = p_partition_ids[r.seg]
                           AND f.end_offset > r.off + 249
                         ORDER BY f.end_offset
                         LIMIT 1), false)
                  END
            ORDER BY r.seg, r.item, r.off
        ) d
        GROUP BY d.seg
        ORDER BY d.seg;
        FETCH v_hinted_cur INTO v_h_seg, v_h_idx, v_h_off, v_h_ids, v_h_new;
    ELSIF v_any_hinted THEN
        -- v4's one-statement hinted verdict for every segment whose tail
        -- needs no probe (the steady state of a warm cache), all at once:
        -- verify every name, take MIN per (segment, item) and read each
        -- original's id. Each run carries its own segment's partition, purge
        -- watermark (txns_start), window cutoff and hash position, which v4
        -- read from the loop's variables; the checks are v4's, term for
        -- term. Runs of one (scattered retries) and longer runs (a replay)
        -- are checked exactly as log_verify_runs_v2 checks them; each
        -- verified occurrence carries its log_txns row's base, id copy and
        -- whether the row's segment still exists (v7: base_offset >=
        -- log_start, see the header), so the id of the MIN occurrence needs
        -- no further lookup.
        OPEN v_hinted_cur FOR
        WITH runs AS MATERIALIZED (
            SELECT r.seg, r.item, r.off, r.len, s.pid, s.start, s.cutoff, s.hat, s.lstart
            FROM unnest(v_run_seg, p_run_items, p_run_offsets, p_run_lens) AS r (seg, item, off, len)
            JOIN unnest(p_partition_ids, v_starts, v_cutoffs, v_hash_at, v_hinted, v_lstarts)
                 WITH ORDINALITY AS s (pid, start, cutoff, hat, hinted, lstart, seg)
              ON s.seg = r.seg
            WHERE s.hinted
        )
        SELECT d.seg,
               array_agg(d.idx),
               array_agg(d.off),
               string_agg(coalesce(s.id, '\x00000000000000000000000000000000'::bytea), ''::bytea),
               (count(*) FILTER (WHERE d.idx < p_counts[d.seg]))::integer
        FROM (
            SELECT DISTINCT ON (v.seg, v.idx) v.seg, v.idx, v.off, v.pid, v.row_base, v.row_ids, v.alive
            FROM (
                SELECT r.seg, r.item AS idx, r.off, r.pid, r.off AS row_base, t.id AS row_ids,
                       t.base_offset >= r.lstart AS alive
                FROM runs r
                CROSS JOIN LATERAL (
                    -- The row's 16 bytes at the named offset, sliced
                    -- here: carrying the row's whole hashes and id copy
                    -- out of the scan (v4) copied ~6 kB per duplicate
                    -- through the limit and the sort below. The CASE
                    -- keeps an offset below the row's base (a purged
                    -- range) from computing a position at all.
                    SELECT t.base_offset, t.end_offset, t.created_at,
                           CASE WHEN t.base_offset <= r.off
                                THEN substring(t.hashes FROM ((r.off - t.base_offset) * 16 + 1)::integer FOR 16) END AS hash,
                           CASE WHEN t.base_offset <= r.off
                                THEN substring(t.ids FROM ((r.off - t.base_offset) * 16 + 1)::integer FOR 16) END AS id
                    FROM queen.log_txns t
                    WHERE t.partition_id = r.pid
                      AND t.end_offset >= r.off
                    ORDER BY t.end_offset
                    LIMIT 1
                ) t
                WHERE r.len = 1
                  AND t.base_offset <= r.off
                  AND t.end_offset >= r.start
                  AND t.created_at >= r.cutoff
                  AND t.hash = substring(p_hashes FROM r.hat + r.item * 16 FOR 16)
                UNION ALL
                SELECT j.seg, (j.item + (g.o - j.run_off))::integer, g.o, j.pid, g.o,
                       substring(j.piece_ids FROM ((g.o - j.lo) * 16 + 1)::integer FOR 16), j.alive
                FROM (
                    -- The span check of log_verify_runs_v2, once per
                    -- piece (OFFSET 0 keeps it from being inlined under
                    -- the OR below), with the piece's slice of the id
                    -- copy read once (v4).
                    SELECT p.*,
                           substring(p.ids FROM ((p.lo - p.base_offset) * 16 + 1)::integer FOR ((p.hi - p.lo + 1) * 16)::integer) AS piece_ids,
                           substring(p.hashes FROM ((p.lo - p.base_offset) * 16 + 1)::integer FOR ((p.hi - p.lo + 1) * 16)::integer)
                             = substring(p_hashes FROM (p.hat + (p.item + p.lo - p.run_off) * 16)::integer FOR ((p.hi - p.lo + 1) * 16)::integer) AS whole,
                           p.base_offset >= p.lstart AS alive
                    FROM (
                        SELECT r.seg, r.pid, r.hat, r.item, r.off AS run_off, r.lstart, t.base_offset, t.hashes, t.ids,
                               GREATEST(r.off, t.base_offset) AS lo,
                               LEAST(r.off + r.len - 1, t.end_offset) AS hi
                        FROM runs r
                        CROSS JOIN LATERAL (
                            SELECT t.base_offset, t.end_offset, t.created_at, t.hashes, t.ids
                            FROM queen.log_txns t
                            WHERE t.partition_id = r.pid
                              AND t.end_offset >= r.off
                              AND t.end_offset <= coalesce((SELECT min(x.end_offset) FROM queen.log_txns x
                                                            WHERE x.partition_id = r.pid
                                                              AND x.end_offset >= r.off + r.len - 1),
                                                           r.off + r.len - 1)
                            ORDER BY t.end_offset
                            LIMIT r.len
                        ) t
                        WHERE r.len > 1
                          AND t.base_offset <= r.off + r.len - 1
                          AND t.end_offset >= r.start
                          AND t.created_at >= r.cutoff
                    ) p
                    OFFSET 0
                ) j
                CROSS JOIN LATERAL generate_series(j.lo, j.hi) AS g (o)
                WHERE j.whole
                   OR substring(j.hashes FROM ((g.o - j.base_offset) * 16 + 1)::integer FOR 16)
                      = substring(p_hashes FROM (j.hat + (j.item + g.o - j.run_off) * 16)::integer FOR 16)
            ) v
            ORDER BY v.seg, v.idx, v.off
        ) d
        LEFT JOIN LATERAL (
            -- v4's id: the verifying row's copy of the directory if its
            -- segment still exists, the all-zero id if retention removed
            -- it, the blob's directory for rows from before 000030. Both
            -- branches now carry the occurrence's own 16-byte id with
            -- row_base = its offset, so this slices 16 bytes at 0.
            SELECT CASE
                     WHEN d.row_ids IS NOT NULL THEN
                       CASE WHEN d.alive THEN substring(d.row_ids FROM ((d.off - d.row_base) * 16 + 1)::integer FOR 16) END
                     ELSE (SELECT CASE WHEN ls.end_offset >= d.off
                                       THEN substring(ls.blob FROM (6 + (d.off - ls.base_offset) * 16)::integer FOR 16) END
                           FROM queen.log_segments ls
                           WHERE ls.partition_id = d.pid AND ls.base_offset <= d.off
                           ORDER BY ls.base_offset DESC
                           LIMIT 1)
                   END AS id
        ) s ON true
        GROUP BY d.seg
        ORDER BY d.seg;
        FETCH v_hinted_cur INTO v_h_seg, v_h_idx, v_h_off, v_h_ids, v_h_new;
    END IF;

    IF v_any_batched THEN
        -- v9: the batched probe, one concatenation per segment. For every
        -- batched segment: the rows of its partition above its watermark
        -- and inside its window (v8's predicates, term for term), in offset
        -- order, their hashes concatenated, with each row's base offset and
        -- hash count (which map an index in the concatenation back to its
        -- offset). Each item's hash is then looked for once in that
        -- concatenation. The first byte match, if aligned, is the lowest
        -- aligned occurrence, hence the item's MIN offset (rows are
        -- disjoint and in offset order); a misaligned first match may hide
        -- an aligned one later, so that item falls back to every row's
        -- aligned slots. One row per batched segment, in segment order: how
        -- many hashes its rows hold, and its items found with their MIN
        -- offsets (NULL when none).
        OPEN v_probe_cur FOR
        WITH s AS MATERIALIZED (
            SELECT u.seg::integer AS seg, u.pid, u.from_off, u.cutoff, u.hat, u.cnt
            FROM unnest(p_partition_ids, v_tfroms, v_cutoffs, v_hash_at, p_counts, v_batched)
                 WITH ORDINALITY AS u (pid, from_off, cutoff, hat, cnt, batched, seg)
            WHERE u.batched
        ), cat AS MATERIALIZED (
            SELECT s.seg, s.pid, s.from_off, s.cutoff, s.hat, s.cnt, r.n, r.allh, r.bases, r.lens
            FROM s
            CROSS JOIN LATERAL (
                SELECT coalesce(sum(t.end_offset - t.base_offset + 1), 0)::bigint AS n,
                       string_agg(t.hashes, ''::bytea ORDER BY t.end_offset) AS allh,
                       array_agg(t.base_offset ORDER BY t.end_offset) AS bases,
                       array_agg(octet_length(t.hashes) / 16 ORDER BY t.end_offset) AS lens
                FROM queen.log_txns t
                WHERE t.partition_id = s.pid AND t.end_offset > s.from_off AND t.created_at >= s.cutoff
            ) r
        ), c AS (
            SELECT k.seg, g.i AS idx, ih.h, k.pid, k.from_off, k.cutoff, k.bases, k.lens,
                   position(ih.h IN k.allh) AS pos
            FROM cat k
            CROSS JOIN LATERAL generate_series(0, k.cnt - 1) AS g (i)
            CROSS JOIN LATERAL (SELECT substring(p_hashes FROM k.hat + g.i * 16 FOR 16) AS h) ih
            WHERE k.allh IS NOT NULL
            OFFSET 0
        ), hits AS (
            -- Only items with a match get here: the rows' running starts
            -- are worked out for them alone.
            SELECT c.seg, c.idx, x.off
            FROM c
            CROSS JOIN LATERAL (
                (SELECT b.base + ((c.pos - 1) / 16 - (b.upto - b.len)) AS off
                 FROM (SELECT u.base, u.len, sum(u.len) OVER (ORDER BY u.ord) AS upto
                       FROM unnest(c.bases, c.lens) WITH ORDINALITY AS u (base, len, ord)) b
                 WHERE (c.pos - 1) % 16 = 0 AND b.upto > (c.pos - 1) / 16
                 ORDER BY b.upto
                 LIMIT 1)
                UNION ALL
                SELECT min(t.base_offset + th.idx) AS off
                FROM queen.log_txns t
                CROSS JOIN LATERAL queen.log_unnest_hashes(t.hashes) th
                WHERE (c.pos - 1) % 16 <> 0
                  AND t.partition_id = c.pid AND t.end_offset > c.from_off AND t.created_at >= c.cutoff
                  AND th.h = c.h
            ) x
            WHERE c.pos > 0 AND x.off IS NOT NULL
        )
        SELECT k.seg, k.n, hh.idx, hh.off
        FROM cat k
        LEFT JOIN (SELECT h.seg, array_agg(h.idx::integer ORDER BY h.idx) AS idx, array_agg(h.off ORDER BY h.idx) AS off
                   FROM hits h GROUP BY h.seg) hh ON hh.seg = k.seg
        ORDER BY k.seg;
        FETCH v_probe_cur INTO v_p_seg, v_p_n, v_p_idx, v_p_off;
    END IF;

    IF v_any_runs THEN
        -- The cold path: for every probed segment whose partition has
        -- compacted rows above its lower bound, each item (frames and hinted
        -- items, as the probe reads them) looked for in one slice of each run
        -- that holds rows ending above the bound: one index descent per
        -- (item, run), whatever the window holds. A slice names candidate
        -- offsets only; each counts once its log_txns row is checked as a
        -- hint is (log_verify_runs_v2's terms): the row holding the offset
        -- ends above the lower bound (so at or above the purge watermark),
        -- is inside the window, and holds the item's 16 bytes there. Runs
        -- never miss a hash of a compacted row (000093), so with the tail's
        -- rows this reads what v11's probe reads, and MIN is taken over
        -- both. One statement, one snapshot: a merge committing meanwhile
        -- (old runs out, their union in) is seen whole or not at all.
        SELECT array_agg(z.seg ORDER BY z.seg, z.idx), array_agg(z.idx ORDER BY z.seg, z.idx), array_agg(z.off ORDER BY z.seg, z.idx)
        INTO v_rh_seg, v_rh_idx, v_rh_off
        FROM (
            SELECT q.seg, q.idx, MIN(c.off) AS off
            FROM (
                SELECT u.seg::integer AS seg, g.i AS idx, substring(p_hashes FROM u.hat + g.i * 16 FOR 16) AS h,
                       u.pid, u.from_off, u.cutoff, u.start
                FROM unnest(p_partition_ids, v_froms, v_cutoffs, v_starts, v_hash_at, p_counts, p_expected, v_runs_need)
                     WITH ORDINALITY AS u (pid, from_off, cutoff, start, hat, cnt, exp, need, seg)
                CROSS JOIN LATERAL generate_series(0, u.cnt + u.exp - 1) AS g (i)
                WHERE u.need
            ) q
            -- Parameterised lookups, never joins: OFFSET 0 and LIMIT 1 keep
            -- the planner from flattening them into a hash join over every
            -- run and slice of the table (a cost that grows with the window).
            CROSS JOIN LATERAL (
                SELECT r.run_id, r.bits
                FROM queen.log_hash_runs r
                WHERE r.partition_id = q.pid AND r.run_hi > q.from_off
                OFFSET 0
            ) r
            CROSS JOIN LATERAL (
                SELECT s.hashes, s.offs, position(q.h IN s.hashes) AS pos
                FROM queen.log_hash_slices s
                WHERE s.run_id = r.run_id AND s.bucket = queen.log_hash_bucket(q.h, r.bits)
                LIMIT 1
            ) s
            -- Every occurrence in the slice, read only where the native byte
            -- search matched at all (s.pos > 0 gates the unrolling: most
            -- items are new). All of them, not the first: the first may fail
            -- its row check (aged, purged) while a later one holds.
            CROSS JOIN LATERAL (
                SELECT s.offs[th.idx + 1] AS off
                FROM queen.log_unnest_hashes(s.hashes) th
                WHERE s.pos > 0 AND th.h = q.h
            ) c
            CROSS JOIN LATERAL (
                SELECT t.base_offset, t.end_offset, t.created_at,
                       CASE WHEN t.base_offset <= c.off
                            THEN substring(t.hashes FROM ((c.off - t.base_offset) * 16 + 1)::integer FOR 16) END AS hash
                FROM queen.log_txns t
                WHERE t.partition_id = q.pid
                  AND t.end_offset >= c.off
                ORDER BY t.end_offset
                LIMIT 1
            ) t
            WHERE t.base_offset <= c.off
              AND t.end_offset > q.from_off
              AND t.end_offset >= q.start
              AND t.created_at >= q.cutoff
              AND t.hash = q.h
            GROUP BY q.seg, q.idx
        ) z;
    END IF;

    IF v_any_joined THEN
        -- Probed segments of more than 32 items without hints (a cold
        -- partition's larger segments), all at once: each segment's tail
        -- rows (above max(from, compacted_upto), inside the window) unrolled
        -- and hash-joined with its items, as log_probe_tail_v1 does for one
        -- segment, and the runs' verified occurrences above; MIN per item.
        -- One statement for the push instead of three per segment (each
        -- planned afresh). One row per joined segment, in segment order: the
        -- hashes its tail holds, its items found and their MIN offsets.
        OPEN v_join_cur FOR
        WITH k AS MATERIALIZED (
            SELECT u.seg::integer AS seg, u.pid, u.from_off, u.cutoff, u.hat, u.cnt
            FROM unnest(p_partition_ids, v_tfroms, v_cutoffs, v_hash_at, p_counts, v_joined)
                 WITH ORDINALITY AS u (pid, from_off, cutoff, hat, cnt, joined, seg)
            WHERE u.joined
        ), tail AS MATERIALIZED (
            SELECT k.seg, t.base_offset, t.end_offset, t.hashes
            FROM k
            JOIN queen.log_txns t
              ON t.partition_id = k.pid AND t.end_offset > k.from_off AND t.created_at >= k.cutoff
        ), tail_hashes AS MATERIALIZED (
            -- Unrolled into narrow rows (segment, offset, 16 bytes) before
            -- the join: unrolled inline, every row carried its whole txns
            -- row's hash blob, and the join sorted those fat rows
            -- (auto_explain: 10.6 of a 15.4 ms statement in one Sort of
            -- 3 838 rows, 3.8 MB).
            SELECT r.seg, r.base_offset + th.idx AS off, th.h
            FROM tail r
            CROSS JOIN LATERAL queen.log_unnest_hashes(r.hashes) th
        ), items AS (
            SELECT k.seg, g.i AS idx, substring(p_hashes FROM k.hat + g.i * 16 FOR 16) AS h
            FROM k
            CROSS JOIN LATERAL generate_series(0, k.cnt - 1) AS g (i)
        ), hits AS (
            SELECT ih.seg, ih.idx, th.off
            FROM tail_hashes th
            JOIN items ih ON ih.seg = th.seg AND ih.h = th.h
            UNION ALL
            SELECT h.seg, h.idx, h.off
            FROM unnest(v_rh_seg, v_rh_idx, v_rh_off) AS h (seg, idx, off)
            WHERE v_joined[h.seg]
        ), best AS (
            SELECT x.seg, x.idx, MIN(x.off) AS off FROM hits x GROUP BY x.seg, x.idx
        )
        SELECT k.seg,
               (SELECT coalesce(sum(r.end_offset - r.base_offset + 1), 0) FROM tail r WHERE r.seg = k.seg)::bigint,
               b.idx, b.off
        FROM k
        LEFT JOIN (SELECT x.seg, array_agg(x.idx::integer ORDER BY x.idx) AS idx, array_agg(x.off ORDER BY x.idx) AS off
                   FROM best x GROUP BY x.seg) b ON b.seg = k.seg
        ORDER BY k.seg;
        FETCH v_join_cur INTO v_j_seg, v_j_n, v_j_idx, v_j_off;
    END IF;

    FOR v_i IN 1 .. v_n LOOP
        v_last := v_lasts[v_i];
        v_window := v_wins[v_i];
        v_count := p_counts[v_i];
        v_expected := p_expected[v_i];
        v_run_cnt := p_run_counts[v_i];
        v_items := v_count + v_expected;

        seg_index := v_i - 1;
        window_seconds := v_window;
        probed := v_probed[v_i];
        probe_hashes := 0;
        hint_offsets := CASE WHEN v_window > 0 THEN v_hint_lens[v_i] ELSE 0 END;
        dup_idx := NULL;
        dup_offsets := NULL;
        dup_ids := NULL;
        refuted_idx := NULL;
        assigned_base := NULL;
        v_ids_done := false;
        v_new_dups := 0;
        v_hint_dups := 0;

        IF v_hinted[v_i] THEN
            -- This segment's part of the batched verdict.
            -- Groups come in segment order and only for segments with a
            -- verified occurrence.
            IF v_h_seg = v_i THEN
                dup_idx := v_h_idx;
                dup_offsets := v_h_off;
                dup_ids := v_h_ids;
                v_new_dups := v_h_new;
                v_hint_dups := cardinality(v_h_idx) - v_h_new;
                FETCH v_hinted_cur INTO v_h_seg, v_h_idx, v_h_off, v_h_ids, v_h_new;
            END IF;
            v_ids_done := true;
        ELSIF v_batched[v_i] THEN
            -- This segment's row of the batched probe (every batched
            -- segment has one, in segment order). All its items are frames.
            IF v_p_seg = v_i THEN
                probe_hashes := v_p_n;
                dup_idx := v_p_idx;
                dup_offsets := v_p_off;
                IF v_runs_need[v_i] AND v_i = ANY (v_rh_seg) THEN
                    -- The runs' occurrences join the tail's, MIN per item.
                    SELECT array_agg(m.idx ORDER BY m.idx), array_agg(m.off ORDER BY m.idx)
                    INTO dup_idx, dup_offsets
                    FROM (
                        SELECT x.idx, MIN(x.off) AS off
                        FROM (
                            SELECT d.idx, d.off FROM unnest(dup_idx, dup_offsets) AS d (idx, off)
                            UNION ALL
                            SELECT h.idx, h.off FROM unnest(v_rh_seg, v_rh_idx, v_rh_off) AS h (seg, idx, off) WHERE h.seg = v_i
                        ) x
                        GROUP BY x.idx
                    ) m;
                END IF;
                v_new_dups := coalesce(cardinality(dup_idx), 0);
                FETCH v_probe_cur INTO v_p_seg, v_p_n, v_p_idx, v_p_off;
            ELSE
                RAISE EXCEPTION 'log_push_v12: the batched probe has no row for segment %', v_i - 1;
            END IF;
        ELSIF v_joined[v_i] THEN
            -- This segment's row of the joined probe (every joined segment
            -- has one, in segment order). All its items are frames.
            IF v_j_seg = v_i THEN
                probe_hashes := v_j_n;
                dup_idx := v_j_idx;
                dup_offsets := v_j_off;
                v_new_dups := coalesce(cardinality(v_j_idx), 0);
                FETCH v_join_cur INTO v_j_seg, v_j_n, v_j_idx, v_j_off;
            ELSE
                RAISE EXCEPTION 'log_push_v12: the joined probe has no row for segment %', v_i - 1;
            END IF;
        ELSIF v_probed[v_i] THEN
            -- v4's path for a segment whose tail needs a probe: MIN over
            -- the verified named offsets and the tail probe. The names cover
            -- (hydrated_from, p_verified], the probe covers (from, last], and
            -- below hydrated_from nothing is in-window.
            v_hashes := substring(p_hashes FROM v_hash_at[v_i] FOR v_items * 16);
            probe_hashes := (SELECT coalesce(sum(t.end_offset - t.base_offset + 1), 0)
                             FROM queen.log_txns t
                             WHERE t.partition_id = p_partition_ids[v_i]
                               AND t.end_offset > v_tfroms[v_i] AND t.created_at >= v_cutoffs[v_i]);
            SELECT array_agg(d.idx ORDER BY d.idx), array_agg(d.off ORDER BY d.idx)
            INTO dup_idx, dup_offsets
            FROM (
                SELECT x.idx, MIN(x.off) AS off
                FROM (
                    SELECT v.idx, v.off
                    FROM queen.log_verify_runs_v2(p_partition_ids[v_i], v_cutoffs[v_i], v_starts[v_i], v_hashes,
                                                 p_run_items[v_run_at[v_i] : v_run_at[v_i] + v_run_cnt - 1],
                                                 p_run_offsets[v_run_at[v_i] : v_run_at[v_i] + v_run_cnt - 1],
                                                 p_run_lens[v_run_at[v_i] : v_run_at[v_i] + v_run_cnt - 1]) v
                    WHERE v_run_cnt > 0
                    UNION ALL
                    SELECT p.idx, p.off
                    FROM queen.log_probe_tail_v1(p_partition_ids[v_i], v_tfroms[v_i], v_cutoffs[v_i], v_hashes) p
                    UNION ALL
                    SELECT h.idx, h.off
                    FROM unnest(v_rh_seg, v_rh_idx, v_rh_off) AS h (seg, idx, off)
                    WHERE h.seg = v_i
                ) x
                GROUP BY x.idx
            ) d;
            IF dup_idx IS NOT NULL THEN
                SELECT count(*) FILTER (WHERE i < v_count), count(*) FILTER (WHERE i >= v_count)
                INTO v_new_dups, v_hint_dups
                FROM unnest(dup_idx) AS i;
            END IF;
        END IF;

        IF v_hint_dups < v_expected THEN
            SELECT array_agg(g ORDER BY g) INTO refuted_idx
            FROM generate_series(v_count, v_items - 1) AS g
            LEFT JOIN unnest(dup_idx) AS d (i) ON d.i = g
            WHERE d.i IS NULL;
        END IF;

        IF dup_idx IS NOT NULL AND NOT v_ids_done THEN
            -- v4's id resolution for the probed path: consecutive offsets
            -- form one range, each range reads the segments that overlap it
            -- and slices each directory once; an offset whose segment
            -- retention removed answers the all-zero id. v8: a segment's
            -- piece of the range takes its ids from the log_txns rows that
            -- cover it (one or several, in offset order); only if one of them
            -- has no id copy (before 000030: one row per segment) from the
            -- blob's directory.
            WITH o AS (
                SELECT x.off, x.ord, x.off - dense_rank() OVER (ORDER BY x.off) AS grp
                FROM unnest(dup_offsets) WITH ORDINALITY AS x (off, ord)
            ), ranges AS (
                SELECT min(o.off) AS lo, max(o.off) AS hi FROM o GROUP BY o.grp
            ), pieces AS (
                SELECT GREATEST(rg.lo, s.base_offset) AS lo, LEAST(rg.hi, s.end_offset) AS hi,
                       coalesce(x.dir,
                                substring(s.blob FROM (6 + (GREATEST(rg.lo, s.base_offset) - s.base_offset) * 16)::integer
                                          FOR ((LEAST(rg.hi, s.end_offset) - GREATEST(rg.lo, s.base_offset) + 1) * 16)::integer)) AS dir
                FROM ranges rg
                CROSS JOIN LATERAL (
                    SELECT ls.base_offset, ls.end_offset, ls.blob
                    FROM queen.log_segments ls
                    WHERE ls.partition_id = p_partition_ids[v_i]
                      AND ls.base_offset <= rg.hi
                      AND ls.base_offset >= coalesce((SELECT max(y.base_offset) FROM queen.log_segments y
                                                      WHERE y.partition_id = p_partition_ids[v_i] AND y.base_offset <= rg.lo),
                                                     rg.lo)
                ) s
                LEFT JOIN LATERAL (
                    -- The rows covering [pl, ph] (every offset of a range is
                    -- in a row: it was just found there), their id slices
                    -- in offset order; NULL if one has no copy.
                    SELECT CASE WHEN bool_and(y.ids IS NOT NULL)
                                THEN string_agg(substring(y.ids FROM ((GREATEST(c.pl, y.base_offset) - y.base_offset) * 16 + 1)::integer
                                                          FOR ((LEAST(c.ph, y.end_offset) - GREATEST(c.pl, y.base_offset) + 1) * 16)::integer),
                                                ''::bytea ORDER BY y.end_offset)
                           END AS dir
                    FROM (SELECT GREATEST(rg.lo, s.base_offset) AS pl, LEAST(rg.hi, s.end_offset) AS ph) c
                    JOIN queen.log_txns y
                      ON y.partition_id = p_partition_ids[v_i]
                     AND y.end_offset >= c.pl
                     AND y.base_offset <= c.ph
                     AND y.end_offset <= coalesce((SELECT min(z.end_offset) FROM queen.log_txns z
                                                   WHERE z.partition_id = p_partition_ids[v_i] AND z.end_offset >= c.ph),
                                                  c.ph)
                ) x ON true
                WHERE s.end_offset >= rg.lo
            )
            SELECT string_agg(coalesce(substring(p.dir FROM ((o.off - p.lo) * 16 + 1)::integer FOR 16), '\x00000000000000000000000000000000'::bytea), ''::bytea ORDER BY o.ord)
            INTO dup_ids
            FROM o LEFT JOIN pieces p ON o.off BETWEEN p.lo AND p.hi;
        END IF;

        IF v_new_dups = 0 AND refuted_idx IS NULL AND v_count > 0 THEN
            v_base[v_i] := v_last + 1;
            assigned_base := v_last + 1;
        END IF;
        RETURN NEXT;
    END LOOP;
    IF v_any_hinted THEN
        CLOSE v_hinted_cur;
    END IF;
    IF v_any_batched THEN
        CLOSE v_probe_cur;
    END IF;
    IF v_any_joined THEN
        CLOSE v_join_cur;
    END IF;

    -- The appends, set-based, still under the row locks (v4's). A segment
    -- that is not appended has a NULL base and writes nothing. Only the
    -- frames' hashes (the first p_counts[i]) go to log_txns, in rows of at
    -- most 250 frames (v8, see the header).
    UPDATE queen.log_partitions lp
    SET last_offset = u.base + u.cnt - 1, last_write_at = v_now
    FROM unnest(p_partition_ids, v_base, p_counts) AS u (id, base, cnt)
    WHERE lp.id = u.id AND u.base IS NOT NULL;

    INSERT INTO queen.log_segments (partition_id, base_offset, end_offset, created_at, blob)
    SELECT u.id, u.base, u.base + u.cnt - 1, v_now, substring(p_blobs FROM u.at FOR u.len)
    FROM unnest(p_partition_ids, v_base, p_counts, v_blob_at, p_blob_lens) AS u (id, base, cnt, at, len)
    WHERE u.base IS NOT NULL;

    INSERT INTO queen.log_txns (partition_id, base_offset, end_offset, created_at, hashes, ids)
    SELECT u.id, u.base + k.off, u.base + k.off + k.n - 1, v_now,
           substring(p_hashes FROM u.at + k.off * 16 FOR k.n * 16),
           substring(p_blobs FROM u.bat + 5 + k.off * 16 FOR k.n * 16)
    FROM unnest(p_partition_ids, v_base, p_counts, v_hash_at, v_blob_at) AS u (id, base, cnt, at, bat)
    CROSS JOIN LATERAL (
        SELECT g.off, LEAST(250, u.cnt - g.off) AS n
        FROM generate_series(0, u.cnt - 1, 250) AS g (off)
    ) k
    WHERE u.base IS NOT NULL;
END
$$;

-- Pushes one bundle after looking up, in the same call, the items the
-- broker's filters could not clear (docs/deduplication.md, "The lookup in
-- the push"). Without it the broker runs queen.log_lookup_v2 and then
-- log_push_v12 as two round trips; a bundle whose maybe items are false
-- positives (nothing found) pays the second trip and a second wait for a
-- core for nothing. This runs the same two calls in that order, with the
-- step between them that the broker would take:
--
-- p_lk_segs[k] (1-based) is the segment whose p_lk_counts[k] maybe items
-- (hashes in p_lk_hashes, spans in p_lk_from / p_lk_to, as log_lookup_v2
-- takes them) are looked up. For such a segment p_verified and p_windows
-- carry the entry's vouch V and its window, or NULL where no entry vouches
-- (unbounded). After the lookup (last_offset L, window W, what it found):
--   * nothing found: the segment goes with the vouch least(V, L) under
--     least(V's window, W) (least ignores NULL), exactly what the broker
--     sends after a lookup that names nothing. Claim 6 of the filter tier
--     (docs/deduplication.md) is unchanged: the lookup read before the push
--     took its locks, and it named nothing, so no item has an in-window
--     occurrence at or below least(V, L) in its span (the lookup's cutoff,
--     now(), is at or before the push's clock_timestamp() cutoff, as a
--     lookup in an earlier transaction's is);
--   * something found: the segment goes with -1, the full probe, which
--     finds that duplicate itself; the segment writes nothing (claim 2) and
--     the broker re-submits the rest, as after any probed duplicate. The
--     broker sends a segment here only when its partition's lookups seldom
--     find anything (src/fusion/lookupPlacement.ts), so the full probe is the
--     rare case; naming the found offsets instead would need the items out
--     of the frame blob, which only the broker builds.
-- Every other segment goes to log_push_v12 as given. The result is
-- log_push_v12's, plus per looked-up segment the lookup's found count, tail
-- (the compactor's trigger) and window (NULL for the others).
CREATE OR REPLACE FUNCTION queen.log_push_looked_v1(
    p_partition_ids bigint[],
    p_verified      bigint[],
    p_windows       integer[],
    p_counts        integer[],
    p_expected      integer[],
    p_hashes        bytea,
    p_blob_lens     integer[],
    p_blobs         bytea,
    p_run_counts    integer[],
    p_run_items     integer[],
    p_run_offsets   bigint[],
    p_run_lens      integer[],
    p_lk_segs       integer[],
    p_lk_counts     integer[],
    p_lk_hashes     bytea,
    p_lk_from       bigint[],
    p_lk_to         bigint[])
RETURNS TABLE (
    seg_index      integer,
    assigned_base  bigint,
    window_seconds integer,
    probed         boolean,
    probe_hashes   bigint,
    hint_offsets   integer,
    dup_idx        integer[],
    dup_offsets    bigint[],
    dup_ids        bytea,
    refuted_idx    integer[],
    lookup_found   integer,
    lookup_tail    bigint,
    lookup_window  integer)
-- No JIT, as log_push_v12.
LANGUAGE plpgsql
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v_n        integer := coalesce(cardinality(p_partition_ids), 0);
    v_m        integer := coalesce(cardinality(p_lk_segs), 0);
    v_verified bigint[] := p_verified;
    v_windows  integer[] := p_windows;
    v_found    integer[] := array_fill(NULL::integer, ARRAY[v_n]);
    v_tail     bigint[] := array_fill(NULL::bigint, ARRAY[v_n]);
    v_lkwin    integer[] := array_fill(NULL::integer, ARRAY[v_n]);
    v_seen     integer := 0;
    v_s        integer;
    r          record;
BEGIN
    IF coalesce(cardinality(p_lk_counts), 0) <> v_m
       OR coalesce(cardinality(p_verified), 0) <> v_n
       OR coalesce(cardinality(p_windows), 0) <> v_n THEN
        RAISE EXCEPTION 'log_push_looked_v1: argument arrays differ in length' USING ERRCODE = '22023';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(p_lk_segs) AS s WHERE s IS NULL OR s < 1 OR s > v_n)
       OR (SELECT count(DISTINCT s) FROM unnest(p_lk_segs) AS s) <> v_m THEN
        RAISE EXCEPTION 'log_push_looked_v1: looked-up segments must be distinct segments of the bundle' USING ERRCODE = '22023';
    END IF;
    IF v_m > 0 THEN
        FOR r IN
            SELECT l.seg_index, l.last_offset, l.window_seconds, l.tail_offsets, coalesce(cardinality(l.found_idx), 0) AS nfound
            FROM queen.log_lookup_v2(
                ARRAY(SELECT p_partition_ids[u.s] FROM unnest(p_lk_segs) WITH ORDINALITY AS u (s, k) ORDER BY u.k),
                p_lk_counts, p_lk_hashes, p_lk_from, p_lk_to) AS l
        LOOP
            v_s := p_lk_segs[r.seg_index + 1];
            IF r.nfound > 0 THEN
                v_verified[v_s] := -1;
                v_windows[v_s] := 0;
            ELSE
                v_verified[v_s] := least(p_verified[v_s], r.last_offset);
                v_windows[v_s] := least(p_windows[v_s], r.window_seconds);
            END IF;
            v_found[v_s] := r.nfound;
            v_tail[v_s] := r.tail_offsets;
            v_lkwin[v_s] := r.window_seconds;
            v_seen := v_seen + 1;
        END LOOP;
    END IF;
    -- One row per looked-up segment, or a segment would keep its NULL
    -- placeholder (log_push_v12 reads NULL as -1: exact, but not what was asked).
    IF v_seen <> v_m THEN
        RAISE EXCEPTION 'log_push_looked_v1: the lookup answered % of % segments', v_seen, v_m USING ERRCODE = 'XX000';
    END IF;
    RETURN QUERY
        SELECT p.seg_index, p.assigned_base, p.window_seconds, p.probed, p.probe_hashes, p.hint_offsets,
               p.dup_idx, p.dup_offsets, p.dup_ids, p.refuted_idx,
               v_found[p.seg_index + 1], v_tail[p.seg_index + 1], v_lkwin[p.seg_index + 1]
        FROM queen.log_push_v12(p_partition_ids, v_verified, v_windows, p_counts, p_expected, p_hashes,
                                p_blob_lens, p_blobs, p_run_counts, p_run_items, p_run_offsets, p_run_lens) AS p;
END
$$;

-- The rolling-upgrade predecessor (see the header): what brokers of the
-- release before the cold path call. Dropped by a later migration. Its
-- argument is v12's without the runs: every probed row is read in log_txns.
CREATE OR REPLACE FUNCTION queen.log_push_v11(
    p_partition_ids bigint[],
    p_verified      bigint[],
    p_windows       integer[],
    p_counts        integer[],
    p_expected      integer[],
    p_hashes        bytea,
    p_blob_lens     integer[],
    p_blobs         bytea,
    p_run_counts    integer[],
    p_run_items     integer[],
    p_run_offsets   bigint[],
    p_run_lens      integer[])
RETURNS TABLE (
    seg_index      integer,
    assigned_base  bigint,
    window_seconds integer,
    probed         boolean,
    probe_hashes   bigint,
    hint_offsets   integer,
    dup_idx        integer[],
    dup_offsets    bigint[],
    dup_ids        bytea,
    refuted_idx    integer[])
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
    v_n          integer := coalesce(cardinality(p_partition_ids), 0);
    v_runs_total integer := coalesce(cardinality(p_run_items), 0);
    v_i          integer;
    v_locked     integer;
    v_distinct   integer;
    -- The partitions' state, in the bundle's order (index = segment).
    v_lasts      bigint[];
    v_starts     bigint[];
    v_wins       integer[];
    v_lstarts    bigint[];
    v_last       bigint;
    v_window     integer;
    v_verified   bigint;
    v_now        timestamptz;
    v_count      integer;
    v_expected   integer;
    v_items      integer;
    v_hashes     bytea;
    v_run_cnt    integer;
    v_bad        integer;
    v_new_dups   integer;
    v_hint_dups  integer;
    v_ids_done   boolean;
    v_any_hinted boolean := false;
    v_hash_pos   integer := 1;
    v_blob_pos   integer := 1;
    v_run_pos    integer := 1;
    -- Per segment, from the first pass.
    v_hash_at    integer[] := array_fill(0, ARRAY[v_n]);
    v_blob_at    integer[] := array_fill(0, ARRAY[v_n]);
    v_run_at     integer[] := array_fill(0, ARRAY[v_n]);
    v_froms      bigint[] := array_fill(NULL::bigint, ARRAY[v_n]);
    v_cutoffs    timestamptz[] := array_fill(NULL::timestamptz, ARRAY[v_n]);
    v_probed     boolean[] := array_fill(false, ARRAY[v_n]);
    v_hinted     boolean[] := array_fill(false, ARRAY[v_n]);
    v_base       bigint[] := array_fill(NULL::bigint, ARRAY[v_n]);
    v_run_seg    integer[];
    v_hint_lens  integer[];
    -- The longest hint run of the push (0 without runs).
    v_max_len    integer := 0;
    -- The batched hinted verdict, read one segment's group at a time: the
    -- segment, its items found (aligned arrays, in the DISTINCT ON's order), their original offsets and ids,
    -- and how many of them are frames (item < count).
    v_hinted_cur refcursor;
    v_h_seg      integer;
    v_h_idx      integer[];
    v_h_off      bigint[];
    v_h_ids      bytea;
    v_h_new      integer;
    -- The batched probe (see the header), read one segment at a time.
    v_batched    boolean[] := array_fill(false, ARRAY[v_n]);
    v_any_batched boolean := false;
    v_probe_cur  refcursor;
    v_p_seg      integer;
    v_p_n        bigint;
    v_p_idx      integer[];
    v_p_off      bigint[];
BEGIN
    IF coalesce(cardinality(p_verified), 0) <> v_n
       OR coalesce(cardinality(p_windows), 0) <> v_n
       OR coalesce(cardinality(p_counts), 0) <> v_n
       OR coalesce(cardinality(p_expected), 0) <> v_n
       OR coalesce(cardinality(p_blob_lens), 0) <> v_n
       OR coalesce(cardinality(p_run_counts), 0) <> v_n
       OR coalesce(cardinality(p_run_offsets), 0) <> v_runs_total
       OR coalesce(cardinality(p_run_lens), 0) <> v_runs_total THEN
        RAISE EXCEPTION 'log_push_v11: argument arrays differ in length' USING ERRCODE = '22023';
    END IF;
    IF v_n = 0 THEN
        RETURN;
    END IF;

    -- The bundle pre-lock: every partition row, ascending id, before any
    -- check (the one global lock order; LockRows runs above the sort), its
    -- state then aggregated in the bundle's order.
    SELECT array_agg(s.last_offset ORDER BY s.ord), array_agg(s.txns_start ORDER BY s.ord),
           array_agg(s.win ORDER BY s.ord), array_agg(s.log_start ORDER BY s.ord), count(*), count(DISTINCT s.id)
    INTO v_lasts, v_starts, v_wins, v_lstarts, v_locked, v_distinct
    FROM (
        SELECT lp.id, lp.last_offset, lp.txns_start, lp.log_start, qu.dedup_window_seconds AS win, u.ord
        FROM queen.log_partitions lp
        JOIN queen.queues qu ON qu.id = lp.queue_id
        JOIN unnest(p_partition_ids) WITH ORDINALITY AS u (id, ord) ON u.id = lp.id
        ORDER BY lp.id
        FOR UPDATE OF lp
    ) s;
    -- A partition named twice joins its row twice (v_distinct < v_locked);
    -- an unknown one joins none (v_locked < v_n).
    IF v_locked <> v_n OR v_distinct <> v_n THEN
        IF (SELECT count(DISTINCT x) FROM unnest(p_partition_ids) AS x) <> v_n THEN
            RAISE EXCEPTION 'log_push_v11: a bundle names a partition twice' USING ERRCODE = '22023';
        END IF;
        RAISE EXCEPTION 'log_push_v11: unknown partition id in bundle' USING ERRCODE = 'P0002';
    END IF;

    v_now := clock_timestamp();

    -- First pass, no statements: frame counts, run counts, positions, and
    -- which check each segment needs (v4's conditions, per segment).
    FOR v_i IN 1 .. v_n LOOP
        v_last := v_lasts[v_i];
        v_window := v_wins[v_i];
        v_count := p_counts[v_i];
        v_expected := p_expected[v_i];
        v_run_cnt := p_run_counts[v_i];
        IF v_count IS NULL OR v_expected IS NULL OR v_count < 0 OR v_expected < 0 OR v_count + v_expected < 1
           OR v_hash_pos + (v_count + v_expected) * 16 - 1 > length(p_hashes)
           OR (v_count = 0 AND p_blob_lens[v_i] <> 0) THEN
            RAISE EXCEPTION 'log_push_v11: segment % has a malformed frame count', v_i - 1 USING ERRCODE = '22023';
        END IF;
        IF v_run_cnt IS NULL OR v_run_cnt < 0 OR v_run_pos + v_run_cnt - 1 > v_runs_total THEN
            RAISE EXCEPTION 'log_push_v11: segment % has malformed hint runs', v_i - 1 USING ERRCODE = '22023';
        END IF;
        v_hash_at[v_i] := v_hash_pos;
        v_blob_at[v_i] := v_blob_pos;
        v_run_at[v_i] := v_run_pos;
        v_hash_pos := v_hash_pos + (v_count + v_expected) * 16;
        v_blob_pos := v_blob_pos + p_blob_lens[v_i];
        v_run_pos := v_run_pos + v_run_cnt;
        -- Each run's segment number, aligned with p_run_items.
        IF v_run_cnt > 0 THEN
            v_run_seg := v_run_seg || array_fill(v_i, ARRAY[v_run_cnt]);
        END IF;

        v_verified := coalesce(p_verified[v_i], -1);
        -- As in v1: a watermark above the allocator vouches for offsets that
        -- do not exist, and one vouched under a smaller window than the queue
        -- now has does not cover the older hashes: neither can be trusted.
        IF v_verified > v_last OR v_window > coalesce(p_windows[v_i], 0) THEN
            v_verified := -1;
        END IF;
        v_froms[v_i] := GREATEST(v_verified, v_starts[v_i] - 1);
        v_cutoffs[v_i] := v_now - make_interval(secs => v_window);
        v_probed[v_i] := v_window > 0 AND v_last > v_froms[v_i];
        v_hinted[v_i] := v_window > 0 AND NOT v_probed[v_i] AND v_run_cnt > 0;
        v_any_hinted := v_any_hinted OR v_hinted[v_i];
        v_batched[v_i] := v_probed[v_i] AND v_run_cnt = 0 AND v_expected = 0 AND v_count <= 32;
        v_any_batched := v_any_batched OR v_batched[v_i];
    END LOOP;
    IF v_run_pos - 1 <> v_runs_total THEN
        RAISE EXCEPTION 'log_push_v11: % hint runs belong to no segment', v_runs_total - (v_run_pos - 1) USING ERRCODE = '22023';
    END IF;

    v_hint_lens := array_fill(0, ARRAY[v_n]);
    IF v_runs_total > 0 THEN
        -- v4's run check for all runs in one scan (the first segment with
        -- a malformed run is named), and the longest run.
        SELECT min(r.seg) FILTER (WHERE r.item IS NULL OR r.len IS NULL OR r.len < 1
                                     OR r.item < p_counts[r.seg] OR r.item + r.len > p_counts[r.seg] + p_expected[r.seg]),
               max(r.len)
        INTO v_bad, v_max_len
        FROM unnest(v_run_seg, p_run_items, p_run_lens) AS r (seg, item, len);
        IF v_bad IS NOT NULL THEN
            RAISE EXCEPTION 'log_push_v11: segment % has malformed hint runs', v_bad - 1 USING ERRCODE = '22023';
        END IF;
        -- A run of one names one offset: the hint size is the run count.
        IF v_max_len = 1 THEN
            v_hint_lens := p_run_counts;
        ELSE
            SELECT array_agg(coalesce(h.total, 0)::integer ORDER BY g.seg)
            INTO v_hint_lens
            FROM generate_series(1, v_n) AS g (seg)
            LEFT JOIN (SELECT r.seg, sum(r.len) AS total FROM unnest(v_run_seg, p_run_lens) AS r (seg, len) GROUP BY r.seg) h ON h.seg = g.seg;
        END IF;
    END IF;

    IF v_any_hinted AND v_max_len = 1 THEN
        -- Every run is a run of one (scattered retries, the common case):
        -- the statement below without its branch for longer runs, which
        -- would find no rows. PostgreSQL plans both afresh on every call
        -- (custom plans: see the header), and planning the longer-run
        -- branch (and starting it) cost ~2 ms per push.
        OPEN v_hinted_cur FOR
        SELECT d.seg,
               array_agg(d.idx),
               array_agg(d.off),
               string_agg(coalesce(d.id, '\x00000000000000000000000000000000'::bytea), ''::bytea),
               (count(*) FILTER (WHERE d.idx < p_counts[d.seg]))::integer
        FROM (
            -- v4's id, as v9 computed it: the verifying row's copy of the
            -- directory if its segment still exists (base_offset >=
            -- log_start, v7), the all-zero id if retention removed it, the
            -- blob's directory for rows from before 000030 (no copy). For a
            -- run whose near lookup found no row, the same from the far
            -- lookup's row (see the header).
            SELECT DISTINCT ON (r.seg, r.item) r.seg::integer AS seg, r.item AS idx, r.off,
                   CASE WHEN t.base_offset IS NOT NULL THEN
                          CASE WHEN t.id IS NOT NULL THEN
                                 CASE WHEN t.base_offset >= v_lstarts[r.seg] THEN t.id END
                               ELSE (SELECT CASE WHEN ls.end_offset >= r.off
                                                    THEN substring(ls.blob FROM (6 + (r.off - ls.base_offset) * 16)::integer FOR 16) END
                                        FROM queen.log_segments ls
                                        WHERE ls.partition_id = p_partition_ids[r.seg] AND ls.base_offset <= r.off
                                        ORDER BY ls.base_offset DESC
                                        LIMIT 1)
                          END
                        ELSE (SELECT CASE WHEN f.ids IS NOT NULL THEN
                                            CASE WHEN f.base_offset >= v_lstarts[r.seg]
                                                 THEN substring(f.ids FROM ((r.off - f.base_offset) * 16 + 1)::integer FOR 16) END
                                          ELSE (SELECT CASE WHEN ls.end_offset >= r.off
                                                    THEN substring(ls.blob FROM (6 + (r.off - ls.base_offset) * 16)::integer FOR 16) END
                                        FROM queen.log_segments ls
                                        WHERE ls.partition_id = p_partition_ids[r.seg] AND ls.base_offset <= r.off
                                        ORDER BY ls.base_offset DESC
                                        LIMIT 1)
                                     END
                              FROM queen.log_txns f
                              WHERE f.partition_id = p_partition_ids[r.seg]
                                AND f.end_offset > r.off + 249
                              ORDER BY f.end_offset
                              LIMIT 1)
                   END AS id
            FROM unnest(v_run_seg, p_run_items, p_run_offsets) AS r (seg, item, off)
            LEFT JOIN LATERAL (
                -- The near lookup: the first row of the partition ending in
                -- [off, off + 249], and its 16 bytes at the named offset
                -- (v6's slicing: carrying the row's whole hashes and id copy
                -- out of the scan copied ~6 kB per duplicate). The CASE
                -- keeps an offset below the row's base (a purged range)
                -- from computing a position at all.
                SELECT t.base_offset, t.end_offset, t.created_at,
                       CASE WHEN t.base_offset <= r.off
                            THEN substring(t.hashes FROM ((r.off - t.base_offset) * 16 + 1)::integer FOR 16) END AS hash,
                       CASE WHEN t.base_offset <= r.off
                            THEN substring(t.ids FROM ((r.off - t.base_offset) * 16 + 1)::integer FOR 16) END AS id
                FROM queen.log_txns t
                WHERE t.partition_id = p_partition_ids[r.seg]
                  AND t.end_offset >= r.off
                  AND t.end_offset <= r.off + 249
                ORDER BY t.end_offset
                LIMIT 1
            ) t ON true
            WHERE v_hinted[r.seg]
              AND CASE WHEN t.base_offset IS NOT NULL THEN
                         t.base_offset <= r.off
                         AND t.end_offset >= v_starts[r.seg]
                         AND t.created_at >= v_cutoffs[r.seg]
                         AND t.hash = substring(p_hashes FROM v_hash_at[r.seg] + r.item * 16 FOR 16)
                       ELSE coalesce((
                         -- The far lookup, only for a run the near one found
                         -- no row for: the first row ending above off + 249,
                         -- with v10's checks on it (no row: not verified).
                         -- It is written twice (here and for the id above)
                         -- on purpose: as one more LEFT JOIN LATERAL, its
                         -- join level cost every run what the bound saved
                         -- (docs/deduplication.md, "log_push_v11"), while
                         -- here both copies run only for the rare run.
                         SELECT f.base_offset <= r.off
                                AND f.end_offset >= v_starts[r.seg]
                                AND f.created_at >= v_cutoffs[r.seg]
                                AND CASE WHEN f.base_offset <= r.off
                                         THEN substring(f.hashes FROM ((r.off - f.base_offset) * 16 + 1)::integer FOR 16) END
                                    = substring(p_hashes FROM v_hash_at[r.seg] + r.item * 16 FOR 16)
                         FROM queen.log_txns f
                         WHERE f.partition_id = p_partition_ids[r.seg]
                           AND f.end_offset > r.off + 249
                         ORDER BY f.end_offset
                         LIMIT 1), false)
                  END
            ORDER BY r.seg, r.item, r.off
        ) d
        GROUP BY d.seg
        ORDER BY d.seg;
        FETCH v_hinted_cur INTO v_h_seg, v_h_idx, v_h_off, v_h_ids, v_h_new;
    ELSIF v_any_hinted THEN
        -- v4's one-statement hinted verdict for every segment whose tail
        -- needs no probe (the steady state of a warm cache), all at once:
        -- verify every name, take MIN per (segment, item) and read each
        -- original's id. Each run carries its own segment's partition, purge
        -- watermark (txns_start), window cutoff and hash position, which v4
        -- read from the loop's variables; the checks are v4's, term for
        -- term. Runs of one (scattered retries) and longer runs (a replay)
        -- are checked exactly as log_verify_runs_v2 checks them; each
        -- verified occurrence carries its log_txns row's base, id copy and
        -- whether the row's segment still exists (v7: base_offset >=
        -- log_start, see the header), so the id of the MIN occurrence needs
        -- no further lookup.
        OPEN v_hinted_cur FOR
        WITH runs AS MATERIALIZED (
            SELECT r.seg, r.item, r.off, r.len, s.pid, s.start, s.cutoff, s.hat, s.lstart
            FROM unnest(v_run_seg, p_run_items, p_run_offsets, p_run_lens) AS r (seg, item, off, len)
            JOIN unnest(p_partition_ids, v_starts, v_cutoffs, v_hash_at, v_hinted, v_lstarts)
                 WITH ORDINALITY AS s (pid, start, cutoff, hat, hinted, lstart, seg)
              ON s.seg = r.seg
            WHERE s.hinted
        )
        SELECT d.seg,
               array_agg(d.idx),
               array_agg(d.off),
               string_agg(coalesce(s.id, '\x00000000000000000000000000000000'::bytea), ''::bytea),
               (count(*) FILTER (WHERE d.idx < p_counts[d.seg]))::integer
        FROM (
            SELECT DISTINCT ON (v.seg, v.idx) v.seg, v.idx, v.off, v.pid, v.row_base, v.row_ids, v.alive
            FROM (
                SELECT r.seg, r.item AS idx, r.off, r.pid, r.off AS row_base, t.id AS row_ids,
                       t.base_offset >= r.lstart AS alive
                FROM runs r
                CROSS JOIN LATERAL (
                    -- The row's 16 bytes at the named offset, sliced
                    -- here: carrying the row's whole hashes and id copy
                    -- out of the scan (v4) copied ~6 kB per duplicate
                    -- through the limit and the sort below. The CASE
                    -- keeps an offset below the row's base (a purged
                    -- range) from computing a position at all.
                    SELECT t.base_offset, t.end_offset, t.created_at,
                           CASE WHEN t.base_offset <= r.off
                                THEN substring(t.hashes FROM ((r.off - t.base_offset) * 16 + 1)::integer FOR 16) END AS hash,
                           CASE WHEN t.base_offset <= r.off
                                THEN substring(t.ids FROM ((r.off - t.base_offset) * 16 + 1)::integer FOR 16) END AS id
                    FROM queen.log_txns t
                    WHERE t.partition_id = r.pid
                      AND t.end_offset >= r.off
                    ORDER BY t.end_offset
                    LIMIT 1
                ) t
                WHERE r.len = 1
                  AND t.base_offset <= r.off
                  AND t.end_offset >= r.start
                  AND t.created_at >= r.cutoff
                  AND t.hash = substring(p_hashes FROM r.hat + r.item * 16 FOR 16)
                UNION ALL
                SELECT j.seg, (j.item + (g.o - j.run_off))::integer, g.o, j.pid, g.o,
                       substring(j.piece_ids FROM ((g.o - j.lo) * 16 + 1)::integer FOR 16), j.alive
                FROM (
                    -- The span check of log_verify_runs_v2, once per
                    -- piece (OFFSET 0 keeps it from being inlined under
                    -- the OR below), with the piece's slice of the id
                    -- copy read once (v4).
                    SELECT p.*,
                           substring(p.ids FROM ((p.lo - p.base_offset) * 16 + 1)::integer FOR ((p.hi - p.lo + 1) * 16)::integer) AS piece_ids,
                           substring(p.hashes FROM ((p.lo - p.base_offset) * 16 + 1)::integer FOR ((p.hi - p.lo + 1) * 16)::integer)
                             = substring(p_hashes FROM (p.hat + (p.item + p.lo - p.run_off) * 16)::integer FOR ((p.hi - p.lo + 1) * 16)::integer) AS whole,
                           p.base_offset >= p.lstart AS alive
                    FROM (
                        SELECT r.seg, r.pid, r.hat, r.item, r.off AS run_off, r.lstart, t.base_offset, t.hashes, t.ids,
                               GREATEST(r.off, t.base_offset) AS lo,
                               LEAST(r.off + r.len - 1, t.end_offset) AS hi
                        FROM runs r
                        CROSS JOIN LATERAL (
                            SELECT t.base_offset, t.end_offset, t.created_at, t.hashes, t.ids
                            FROM queen.log_txns t
                            WHERE t.partition_id = r.pid
                              AND t.end_offset >= r.off
                              AND t.end_offset <= coalesce((SELECT min(x.end_offset) FROM queen.log_txns x
                                                            WHERE x.partition_id = r.pid
                                                              AND x.end_offset >= r.off + r.len - 1),
                                                           r.off + r.len - 1)
                            ORDER BY t.end_offset
                            LIMIT r.len
                        ) t
                        WHERE r.len > 1
                          AND t.base_offset <= r.off + r.len - 1
                          AND t.end_offset >= r.start
                          AND t.created_at >= r.cutoff
                    ) p
                    OFFSET 0
                ) j
                CROSS JOIN LATERAL generate_series(j.lo, j.hi) AS g (o)
                WHERE j.whole
                   OR substring(j.hashes FROM ((g.o - j.base_offset) * 16 + 1)::integer FOR 16)
                      = substring(p_hashes FROM (j.hat + (j.item + g.o - j.run_off) * 16)::integer FOR 16)
            ) v
            ORDER BY v.seg, v.idx, v.off
        ) d
        LEFT JOIN LATERAL (
            -- v4's id: the verifying row's copy of the directory if its
            -- segment still exists, the all-zero id if retention removed
            -- it, the blob's directory for rows from before 000030. Both
            -- branches now carry the occurrence's own 16-byte id with
            -- row_base = its offset, so this slices 16 bytes at 0.
            SELECT CASE
                     WHEN d.row_ids IS NOT NULL THEN
                       CASE WHEN d.alive THEN substring(d.row_ids FROM ((d.off - d.row_base) * 16 + 1)::integer FOR 16) END
                     ELSE (SELECT CASE WHEN ls.end_offset >= d.off
                                       THEN substring(ls.blob FROM (6 + (d.off - ls.base_offset) * 16)::integer FOR 16) END
                           FROM queen.log_segments ls
                           WHERE ls.partition_id = d.pid AND ls.base_offset <= d.off
                           ORDER BY ls.base_offset DESC
                           LIMIT 1)
                   END AS id
        ) s ON true
        GROUP BY d.seg
        ORDER BY d.seg;
        FETCH v_hinted_cur INTO v_h_seg, v_h_idx, v_h_off, v_h_ids, v_h_new;
    END IF;

    IF v_any_batched THEN
        -- v9: the batched probe, one concatenation per segment. For every
        -- batched segment: the rows of its partition above its watermark
        -- and inside its window (v8's predicates, term for term), in offset
        -- order, their hashes concatenated, with each row's base offset and
        -- hash count (which map an index in the concatenation back to its
        -- offset). Each item's hash is then looked for once in that
        -- concatenation. The first byte match, if aligned, is the lowest
        -- aligned occurrence, hence the item's MIN offset (rows are
        -- disjoint and in offset order); a misaligned first match may hide
        -- an aligned one later, so that item falls back to every row's
        -- aligned slots. One row per batched segment, in segment order: how
        -- many hashes its rows hold, and its items found with their MIN
        -- offsets (NULL when none).
        OPEN v_probe_cur FOR
        WITH s AS MATERIALIZED (
            SELECT u.seg::integer AS seg, u.pid, u.from_off, u.cutoff, u.hat, u.cnt
            FROM unnest(p_partition_ids, v_froms, v_cutoffs, v_hash_at, p_counts, v_batched)
                 WITH ORDINALITY AS u (pid, from_off, cutoff, hat, cnt, batched, seg)
            WHERE u.batched
        ), cat AS MATERIALIZED (
            SELECT s.seg, s.pid, s.from_off, s.cutoff, s.hat, s.cnt, r.n, r.allh, r.bases, r.lens
            FROM s
            CROSS JOIN LATERAL (
                SELECT coalesce(sum(t.end_offset - t.base_offset + 1), 0)::bigint AS n,
                       string_agg(t.hashes, ''::bytea ORDER BY t.end_offset) AS allh,
                       array_agg(t.base_offset ORDER BY t.end_offset) AS bases,
                       array_agg(octet_length(t.hashes) / 16 ORDER BY t.end_offset) AS lens
                FROM queen.log_txns t
                WHERE t.partition_id = s.pid AND t.end_offset > s.from_off AND t.created_at >= s.cutoff
            ) r
        ), c AS (
            SELECT k.seg, g.i AS idx, ih.h, k.pid, k.from_off, k.cutoff, k.bases, k.lens,
                   position(ih.h IN k.allh) AS pos
            FROM cat k
            CROSS JOIN LATERAL generate_series(0, k.cnt - 1) AS g (i)
            CROSS JOIN LATERAL (SELECT substring(p_hashes FROM k.hat + g.i * 16 FOR 16) AS h) ih
            WHERE k.allh IS NOT NULL
            OFFSET 0
        ), hits AS (
            -- Only items with a match get here: the rows' running starts
            -- are worked out for them alone.
            SELECT c.seg, c.idx, x.off
            FROM c
            CROSS JOIN LATERAL (
                (SELECT b.base + ((c.pos - 1) / 16 - (b.upto - b.len)) AS off
                 FROM (SELECT u.base, u.len, sum(u.len) OVER (ORDER BY u.ord) AS upto
                       FROM unnest(c.bases, c.lens) WITH ORDINALITY AS u (base, len, ord)) b
                 WHERE (c.pos - 1) % 16 = 0 AND b.upto > (c.pos - 1) / 16
                 ORDER BY b.upto
                 LIMIT 1)
                UNION ALL
                SELECT min(t.base_offset + th.idx) AS off
                FROM queen.log_txns t
                CROSS JOIN LATERAL queen.log_unnest_hashes(t.hashes) th
                WHERE (c.pos - 1) % 16 <> 0
                  AND t.partition_id = c.pid AND t.end_offset > c.from_off AND t.created_at >= c.cutoff
                  AND th.h = c.h
            ) x
            WHERE c.pos > 0 AND x.off IS NOT NULL
        )
        SELECT k.seg, k.n, hh.idx, hh.off
        FROM cat k
        LEFT JOIN (SELECT h.seg, array_agg(h.idx::integer ORDER BY h.idx) AS idx, array_agg(h.off ORDER BY h.idx) AS off
                   FROM hits h GROUP BY h.seg) hh ON hh.seg = k.seg
        ORDER BY k.seg;
        FETCH v_probe_cur INTO v_p_seg, v_p_n, v_p_idx, v_p_off;
    END IF;

    FOR v_i IN 1 .. v_n LOOP
        v_last := v_lasts[v_i];
        v_window := v_wins[v_i];
        v_count := p_counts[v_i];
        v_expected := p_expected[v_i];
        v_run_cnt := p_run_counts[v_i];
        v_items := v_count + v_expected;

        seg_index := v_i - 1;
        window_seconds := v_window;
        probed := v_probed[v_i];
        probe_hashes := 0;
        hint_offsets := CASE WHEN v_window > 0 THEN v_hint_lens[v_i] ELSE 0 END;
        dup_idx := NULL;
        dup_offsets := NULL;
        dup_ids := NULL;
        refuted_idx := NULL;
        assigned_base := NULL;
        v_ids_done := false;
        v_new_dups := 0;
        v_hint_dups := 0;

        IF v_hinted[v_i] THEN
            -- This segment's part of the batched verdict.
            -- Groups come in segment order and only for segments with a
            -- verified occurrence.
            IF v_h_seg = v_i THEN
                dup_idx := v_h_idx;
                dup_offsets := v_h_off;
                dup_ids := v_h_ids;
                v_new_dups := v_h_new;
                v_hint_dups := cardinality(v_h_idx) - v_h_new;
                FETCH v_hinted_cur INTO v_h_seg, v_h_idx, v_h_off, v_h_ids, v_h_new;
            END IF;
            v_ids_done := true;
        ELSIF v_batched[v_i] THEN
            -- This segment's row of the batched probe (every batched
            -- segment has one, in segment order). All its items are frames.
            IF v_p_seg = v_i THEN
                probe_hashes := v_p_n;
                dup_idx := v_p_idx;
                dup_offsets := v_p_off;
                v_new_dups := coalesce(cardinality(v_p_idx), 0);
                FETCH v_probe_cur INTO v_p_seg, v_p_n, v_p_idx, v_p_off;
            ELSE
                RAISE EXCEPTION 'log_push_v11: the batched probe has no row for segment %', v_i - 1;
            END IF;
        ELSIF v_probed[v_i] THEN
            -- v4's path for a segment whose tail needs a probe: MIN over
            -- the verified named offsets and the tail probe. The names cover
            -- (hydrated_from, p_verified], the probe covers (from, last], and
            -- below hydrated_from nothing is in-window.
            v_hashes := substring(p_hashes FROM v_hash_at[v_i] FOR v_items * 16);
            probe_hashes := (SELECT coalesce(sum(t.end_offset - t.base_offset + 1), 0)
                             FROM queen.log_txns t
                             WHERE t.partition_id = p_partition_ids[v_i]
                               AND t.end_offset > v_froms[v_i] AND t.created_at >= v_cutoffs[v_i]);
            SELECT array_agg(d.idx ORDER BY d.idx), array_agg(d.off ORDER BY d.idx)
            INTO dup_idx, dup_offsets
            FROM (
                SELECT x.idx, MIN(x.off) AS off
                FROM (
                    SELECT v.idx, v.off
                    FROM queen.log_verify_runs_v2(p_partition_ids[v_i], v_cutoffs[v_i], v_starts[v_i], v_hashes,
                                                 p_run_items[v_run_at[v_i] : v_run_at[v_i] + v_run_cnt - 1],
                                                 p_run_offsets[v_run_at[v_i] : v_run_at[v_i] + v_run_cnt - 1],
                                                 p_run_lens[v_run_at[v_i] : v_run_at[v_i] + v_run_cnt - 1]) v
                    WHERE v_run_cnt > 0
                    UNION ALL
                    SELECT p.idx, p.off
                    FROM queen.log_probe_tail_v1(p_partition_ids[v_i], v_froms[v_i], v_cutoffs[v_i], v_hashes) p
                ) x
                GROUP BY x.idx
            ) d;
            IF dup_idx IS NOT NULL THEN
                SELECT count(*) FILTER (WHERE i < v_count), count(*) FILTER (WHERE i >= v_count)
                INTO v_new_dups, v_hint_dups
                FROM unnest(dup_idx) AS i;
            END IF;
        END IF;

        IF v_hint_dups < v_expected THEN
            SELECT array_agg(g ORDER BY g) INTO refuted_idx
            FROM generate_series(v_count, v_items - 1) AS g
            LEFT JOIN unnest(dup_idx) AS d (i) ON d.i = g
            WHERE d.i IS NULL;
        END IF;

        IF dup_idx IS NOT NULL AND NOT v_ids_done THEN
            -- v4's id resolution for the probed path: consecutive offsets
            -- form one range, each range reads the segments that overlap it
            -- and slices each directory once; an offset whose segment
            -- retention removed answers the all-zero id. v8: a segment's
            -- piece of the range takes its ids from the log_txns rows that
            -- cover it (one or several, in offset order); only if one of them
            -- has no id copy (before 000030: one row per segment) from the
            -- blob's directory.
            WITH o AS (
                SELECT x.off, x.ord, x.off - dense_rank() OVER (ORDER BY x.off) AS grp
                FROM unnest(dup_offsets) WITH ORDINALITY AS x (off, ord)
            ), ranges AS (
                SELECT min(o.off) AS lo, max(o.off) AS hi FROM o GROUP BY o.grp
            ), pieces AS (
                SELECT GREATEST(rg.lo, s.base_offset) AS lo, LEAST(rg.hi, s.end_offset) AS hi,
                       coalesce(x.dir,
                                substring(s.blob FROM (6 + (GREATEST(rg.lo, s.base_offset) - s.base_offset) * 16)::integer
                                          FOR ((LEAST(rg.hi, s.end_offset) - GREATEST(rg.lo, s.base_offset) + 1) * 16)::integer)) AS dir
                FROM ranges rg
                CROSS JOIN LATERAL (
                    SELECT ls.base_offset, ls.end_offset, ls.blob
                    FROM queen.log_segments ls
                    WHERE ls.partition_id = p_partition_ids[v_i]
                      AND ls.base_offset <= rg.hi
                      AND ls.base_offset >= coalesce((SELECT max(y.base_offset) FROM queen.log_segments y
                                                      WHERE y.partition_id = p_partition_ids[v_i] AND y.base_offset <= rg.lo),
                                                     rg.lo)
                ) s
                LEFT JOIN LATERAL (
                    -- The rows covering [pl, ph] (every offset of a range is
                    -- in a row: it was just found there), their id slices
                    -- in offset order; NULL if one has no copy.
                    SELECT CASE WHEN bool_and(y.ids IS NOT NULL)
                                THEN string_agg(substring(y.ids FROM ((GREATEST(c.pl, y.base_offset) - y.base_offset) * 16 + 1)::integer
                                                          FOR ((LEAST(c.ph, y.end_offset) - GREATEST(c.pl, y.base_offset) + 1) * 16)::integer),
                                                ''::bytea ORDER BY y.end_offset)
                           END AS dir
                    FROM (SELECT GREATEST(rg.lo, s.base_offset) AS pl, LEAST(rg.hi, s.end_offset) AS ph) c
                    JOIN queen.log_txns y
                      ON y.partition_id = p_partition_ids[v_i]
                     AND y.end_offset >= c.pl
                     AND y.base_offset <= c.ph
                     AND y.end_offset <= coalesce((SELECT min(z.end_offset) FROM queen.log_txns z
                                                   WHERE z.partition_id = p_partition_ids[v_i] AND z.end_offset >= c.ph),
                                                  c.ph)
                ) x ON true
                WHERE s.end_offset >= rg.lo
            )
            SELECT string_agg(coalesce(substring(p.dir FROM ((o.off - p.lo) * 16 + 1)::integer FOR 16), '\x00000000000000000000000000000000'::bytea), ''::bytea ORDER BY o.ord)
            INTO dup_ids
            FROM o LEFT JOIN pieces p ON o.off BETWEEN p.lo AND p.hi;
        END IF;

        IF v_new_dups = 0 AND refuted_idx IS NULL AND v_count > 0 THEN
            v_base[v_i] := v_last + 1;
            assigned_base := v_last + 1;
        END IF;
        RETURN NEXT;
    END LOOP;
    IF v_any_hinted THEN
        CLOSE v_hinted_cur;
    END IF;
    IF v_any_batched THEN
        CLOSE v_probe_cur;
    END IF;

    -- The appends, set-based, still under the row locks (v4's). A segment
    -- that is not appended has a NULL base and writes nothing. Only the
    -- frames' hashes (the first p_counts[i]) go to log_txns, in rows of at
    -- most 250 frames (v8, see the header).
    UPDATE queen.log_partitions lp
    SET last_offset = u.base + u.cnt - 1, last_write_at = v_now
    FROM unnest(p_partition_ids, v_base, p_counts) AS u (id, base, cnt)
    WHERE lp.id = u.id AND u.base IS NOT NULL;

    INSERT INTO queen.log_segments (partition_id, base_offset, end_offset, created_at, blob)
    SELECT u.id, u.base, u.base + u.cnt - 1, v_now, substring(p_blobs FROM u.at FOR u.len)
    FROM unnest(p_partition_ids, v_base, p_counts, v_blob_at, p_blob_lens) AS u (id, base, cnt, at, len)
    WHERE u.base IS NOT NULL;

    INSERT INTO queen.log_txns (partition_id, base_offset, end_offset, created_at, hashes, ids)
    SELECT u.id, u.base + k.off, u.base + k.off + k.n - 1, v_now,
           substring(p_hashes FROM u.at + k.off * 16 FOR k.n * 16),
           substring(p_blobs FROM u.bat + 5 + k.off * 16 FOR k.n * 16)
    FROM unnest(p_partition_ids, v_base, p_counts, v_hash_at, v_blob_at) AS u (id, base, cnt, at, bat)
    CROSS JOIN LATERAL (
        SELECT g.off, LEAST(250, u.cnt - g.off) AS n
        FROM generate_series(0, u.cnt - 1, 250) AS g (off)
    ) k
    WHERE u.base IS NOT NULL;
END
$$;
