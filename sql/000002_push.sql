-- 000002: provisioning and the bundle push (version 1).
--
-- Why the push is shaped this way is argued in docs/deduplication.md. The four
-- claims it keeps:
--   1. The log_partitions row lock serializes writers of one partition, and is
--      taken (SELECT ... FOR UPDATE, ascending id) before any probe, so
--      probe-then-allocate is race-free.
--   2. A duplicate writes nothing: no allocator bump, no segment, no log_txns
--      row. No rollback, hence no savepoint; other segments of the bundle
--      commit untouched.
--   3. MIN picks the original occurrence when one hash matches several rows.
--   4. The probed span has two lower bounds: the purge watermark
--      (txns_start - 1) and the broker's vouched watermark (p_verified).

-- Provisions queues and partitions on first contact and returns their ids and
-- current windows. Runs as its own short transaction, before any push
-- transaction, so a push only ever locks rows that already exist.
--
-- Deadlock freedom: inserts happen in one global order (queue name, then
-- partition name); ON CONFLICT DO NOTHING only waits on a concurrent inserter
-- of the same key, and two provisioners wait on each other's keys in the same
-- order, so no cycle can form. Existing rows are not locked at all.
CREATE FUNCTION queen.log_provision_v1(p_queues text[], p_partitions text[])
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

    RETURN QUERY
    SELECT DISTINCT qu.name, lp.name, lp.id, qu.dedup_window_seconds
    FROM unnest(p_queues, p_partitions) AS x (q, p)
    JOIN queen.queues qu ON qu.name = x.q
    JOIN queen.log_partitions lp ON lp.queue_id = qu.id AND lp.name = x.p;
END
$$;

-- Pushes one bundle. Segment i goes to partition p_partition_ids[i] (distinct
-- within a bundle) and holds p_counts[i] frames; the broker vouches
-- p_verified[i] (-1: cannot vouch, probe the whole window), a claim made under
-- a window of p_windows[i] seconds. The segments' hashes (16 bytes per frame)
-- and packed frame blobs arrive concatenated in two bytea parameters, cut by
-- p_counts and p_blob_lens: a single bytea travels in binary, an array of
-- bytea would travel hex-encoded at twice the size.
--
-- One output row per segment, in input order. A segment with any duplicate
-- writes nothing and reports, for each duplicate frame index, the original
-- (minimum) offset and the original message id (all-zero UUID when retention
-- already removed the original segment). A segment without duplicates is
-- appended at assigned_base .. assigned_base + n - 1.
--
-- probed says whether the duplicate probe ran; it is how tests and metrics
-- prove that a vouched watermark skips it.
--
-- Shape: one statement locks and reads every partition row of the bundle in
-- ascending id (the pre-lock), the per-segment loop only decides (and probes
-- where it must), and three set-based statements then write every appended
-- segment: the allocator UPDATE, log_segments and log_txns. All of it under
-- the locks, so the probe-then-allocate argument is unchanged.
CREATE FUNCTION queen.log_push_v1(
    p_partition_ids bigint[],
    p_verified      bigint[],
    p_windows       integer[],
    p_counts        integer[],
    p_hashes        bytea,
    p_blob_lens     integer[],
    p_blobs         bytea)
RETURNS TABLE (
    seg_index      integer,
    assigned_base  bigint,
    window_seconds integer,
    probed         boolean,
    dup_idx        integer[],
    dup_offsets    bigint[],
    dup_ids        uuid[])
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
    v_n          integer := coalesce(cardinality(p_partition_ids), 0);
    v_i          integer;
    v_k          integer;
    v_ids        bigint[];
    v_lasts      bigint[];
    v_starts     bigint[];
    v_wins       integer[];
    v_last       bigint;
    v_window     integer;
    v_verified   bigint;
    v_from       bigint;
    v_now        timestamptz;
    v_count      integer;
    v_hashes     bytea;
    v_hash_pos   integer := 1;
    v_blob_pos   integer := 1;
    -- Per segment: where its hashes and blob start, and its base when appended (NULL: nothing written).
    v_hash_at    integer[] := array_fill(0, ARRAY[v_n]);
    v_blob_at    integer[] := array_fill(0, ARRAY[v_n]);
    v_base       bigint[] := array_fill(NULL::bigint, ARRAY[v_n]);
BEGIN
    IF coalesce(cardinality(p_verified), 0) <> v_n
       OR coalesce(cardinality(p_windows), 0) <> v_n
       OR coalesce(cardinality(p_counts), 0) <> v_n
       OR coalesce(cardinality(p_blob_lens), 0) <> v_n THEN
        RAISE EXCEPTION 'log_push_v1: argument arrays differ in length' USING ERRCODE = '22023';
    END IF;
    IF v_n = 0 THEN
        RETURN;
    END IF;

    -- The bundle pre-lock: every partition row, ascending id, before any
    -- probe (the one global lock order), reading the state the loop needs.
    SELECT array_agg(s.id ORDER BY s.id), array_agg(s.last_offset ORDER BY s.id),
           array_agg(s.txns_start ORDER BY s.id), array_agg(s.win ORDER BY s.id)
    INTO v_ids, v_lasts, v_starts, v_wins
    FROM (
        SELECT lp.id, lp.last_offset, lp.txns_start, qu.dedup_window_seconds AS win
        FROM queen.log_partitions lp
        JOIN queen.queues qu ON qu.id = lp.queue_id
        WHERE lp.id = ANY (p_partition_ids)
        ORDER BY lp.id
        FOR UPDATE OF lp
    ) s;
    IF coalesce(cardinality(v_ids), 0) <> v_n THEN
        IF (SELECT count(DISTINCT x) FROM unnest(p_partition_ids) AS x) <> v_n THEN
            RAISE EXCEPTION 'log_push_v1: a bundle names a partition twice' USING ERRCODE = '22023';
        END IF;
        RAISE EXCEPTION 'log_push_v1: unknown partition id in bundle' USING ERRCODE = 'P0002';
    END IF;

    v_now := clock_timestamp();

    FOR v_i IN 1 .. v_n LOOP
        v_k := array_position(v_ids, p_partition_ids[v_i]);
        v_last := v_lasts[v_k];
        v_window := v_wins[v_k];
        v_count := p_counts[v_i];
        IF v_count IS NULL OR v_count < 1 OR v_hash_pos + v_count * 16 - 1 > length(p_hashes) THEN
            RAISE EXCEPTION 'log_push_v1: segment % has a malformed frame count', v_i - 1 USING ERRCODE = '22023';
        END IF;
        v_hash_at[v_i] := v_hash_pos;
        v_blob_at[v_i] := v_blob_pos;
        v_hash_pos := v_hash_pos + v_count * 16;
        v_blob_pos := v_blob_pos + p_blob_lens[v_i];

        v_verified := coalesce(p_verified[v_i], -1);
        -- A watermark above the allocator vouches for offsets that do not
        -- exist (a cache that outlived a restore, say): it cannot be trusted.
        IF v_verified > v_last THEN
            v_verified := -1;
        END IF;
        -- The watermark covers the window the broker knew. If the queue's
        -- window has since grown (a /configure its memo has not seen yet),
        -- hashes older than that window are not covered: cannot vouch.
        IF v_window > coalesce(p_windows[v_i], 0) THEN
            v_verified := -1;
        END IF;
        v_from := GREATEST(v_verified, v_starts[v_k] - 1);

        seg_index := v_i - 1;
        window_seconds := v_window;
        probed := false;
        dup_idx := NULL;
        dup_offsets := NULL;
        dup_ids := NULL;
        assigned_base := NULL;

        IF v_window > 0 AND v_last > v_from THEN
            probed := true;
            v_hashes := substring(p_hashes FROM v_hash_at[v_i] FOR v_count * 16);
            SELECT array_agg(d.idx ORDER BY d.idx), array_agg(d.off ORDER BY d.idx)
            INTO dup_idx, dup_offsets
            FROM (
                SELECT ih.idx AS idx, MIN(t.base_offset + th.idx) AS off
                FROM queen.log_txns t
                CROSS JOIN LATERAL queen.log_unnest_hashes(t.hashes) th
                JOIN queen.log_unnest_hashes(v_hashes) ih ON ih.h = th.h
                WHERE t.partition_id = p_partition_ids[v_i]
                  AND t.end_offset > v_from
                  AND t.created_at >= v_now - make_interval(secs => v_window)
                GROUP BY ih.idx
            ) d;
        END IF;

        IF dup_idx IS NOT NULL THEN
            -- Resolve each original offset to the message id stored in the
            -- original segment's id directory (docs/frame-format.md).
            SELECT array_agg(
                       CASE WHEN s.end_offset >= o.off
                            THEN encode(substring(s.blob FROM 6 + (o.off - s.base_offset)::integer * 16 FOR 16), 'hex')::uuid
                            ELSE '00000000-0000-0000-0000-000000000000'::uuid
                       END
                       ORDER BY o.ord)
            INTO dup_ids
            FROM unnest(dup_offsets) WITH ORDINALITY AS o (off, ord)
            LEFT JOIN LATERAL (
                SELECT ls.base_offset, ls.end_offset, ls.blob
                FROM queen.log_segments ls
                WHERE ls.partition_id = p_partition_ids[v_i] AND ls.base_offset <= o.off
                ORDER BY ls.base_offset DESC
                LIMIT 1
            ) s ON true;
        ELSE
            v_base[v_i] := v_last + 1;
            assigned_base := v_last + 1;
        END IF;
        RETURN NEXT;
    END LOOP;

    -- The appends, set-based, still under the row locks. A duplicate segment
    -- has a NULL base and writes nothing.
    UPDATE queen.log_partitions lp
    SET last_offset = u.base + u.cnt - 1, last_write_at = v_now
    FROM unnest(p_partition_ids, v_base, p_counts) AS u (id, base, cnt)
    WHERE lp.id = u.id AND u.base IS NOT NULL;

    INSERT INTO queen.log_segments (partition_id, base_offset, end_offset, created_at, blob)
    SELECT u.id, u.base, u.base + u.cnt - 1, v_now, substring(p_blobs FROM u.at FOR u.len)
    FROM unnest(p_partition_ids, v_base, p_counts, v_blob_at, p_blob_lens) AS u (id, base, cnt, at, len)
    WHERE u.base IS NOT NULL;

    INSERT INTO queen.log_txns (partition_id, base_offset, end_offset, created_at, hashes)
    SELECT u.id, u.base, u.base + u.cnt - 1, v_now, substring(p_hashes FROM u.at FOR u.cnt * 16)
    FROM unnest(p_partition_ids, v_base, p_counts, v_hash_at) AS u (id, base, cnt, at)
    WHERE u.base IS NOT NULL;
END
$$;
