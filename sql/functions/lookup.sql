-- The lookup family: where a partition's window holds some hashes, read
-- without taking any lock. The broker asks it for the items its dedup filter
-- cannot clear (docs/deduplication.md, "The filter tier and the lookup"), and
-- names what it finds to log_push_v12 as hints, which the push verifies
-- positionally under the row lock. Nothing here decides a verdict.
--
-- What a caller may rely on (the lookup's one claim): every offset it names
-- holds the item's 16 bytes in a log_txns row of the partition that ends at
-- or above txns_start and was created at or after now() - window; and for
-- every item whose lowest such offset at or below last_offset (returned)
-- lies in its span [p_item_from, p_item_to], that offset is named, as of
-- one moment during the call. The span is the caller's to know: it narrows
-- an item only when it knows that no in-window occurrence of it at or
-- below the watermark it will vouch lies outside (the broker's filter
-- generations, each holding the hashes of its own span of offsets, say so:
-- src/dedup/entry.ts, maybeItems); an item with no span (NULL) has the
-- whole window, and the claim is then the one without spans. So the lowest
-- in-window occurrence at or below min(vouch, last_offset) is named, and
-- for a push that comes later
-- and names what the lookup found (log_push_v12 verifies each name under the
-- row lock and takes MIN over the verified names and its probe above the
-- vouch):
--   * the lowest occurrence in the push's window at or below last_offset was
--     in the window at the lookup (the cutoff only rises, rows are never
--     rewritten, the purge watermark only rises), so it is named, unless
--     the named lowest one left the window (aged or purged) in between:
--     then the push refutes it, writes nothing for the segment, and the
--     broker looks the item up again with that offset struck out, whose
--     lowest in-window occurrence is now another (each round strikes one);
--   * occurrences above last_offset are the push's to probe: the broker
--     vouches at most last_offset for the segment.

-- Looks up the items of a bundle's segments. Segment i (1-based in the
-- arrays, seg_index = i - 1 in the result) is partition p_partition_ids[i]
-- with p_counts[i] items, whose hashes arrive concatenated in p_hashes.
-- Item k of the concatenation (1-based) is searched in the offsets
-- [p_item_from[k], p_item_to[k]] (each NULL, or the array NULL: unbounded
-- on that side): a run holding no offset of the span is not read, and an
-- item whose span ends at or below the tail's start skips the tail. A
-- search reads whole runs, so it may name occurrences outside the span;
-- each is still an in-window occurrence, and the lowest one inside the span
-- is named whenever it is the item's lowest at or below last_offset (the
-- runs overlapping the span hold every occurrence inside it, and the
-- argument below is the same over them).
--
-- One row per segment, in input order:
--   last_offset    the partition's allocator when its state was read; every
--                  row at or below it is visible to the statements after;
--   window_seconds the queue's window then (0: nothing looked up);
--   tail_offsets    offsets above compacted_upto (and the purge watermark):
--                  the tail, searched for the items the runs did not answer;
--                  the broker asks for compaction when it is long
--                  (log_compact_v1 counts it the same way);
--   found_idx, found_offsets
--                  the (item, offset) pairs found, aligned: each item's
--                  lowest verified occurrence in the runs, or else its
--                  lowest in the tail (NULL when nothing was found).
--
-- How: the partition rows are read first (statement 1), so last_offset and
-- compacted_upto are committed values; then, each as a statement of its own
-- that runs only when some segment needs it (so a lookup pays only the
-- executor start-up of what it uses):
--   * the runs (sql/000093), for rows ending in (txns_start - 1,
--     compacted_upto]: an item's runs in ascending run_lo, one slice each,
--     every candidate in it at or below compacted_upto and checked (see
--     "A candidate's check" below: its row exists, ends at or above
--     txns_start, is inside the window, holds the 16 bytes); the search
--     stops at the first run that answers, and then reads only the runs
--     that may still hold a lower offset (see the statement). compacted_upto
--     only rises and a merge replaces runs by their union in one
--     transaction, so runs read after statement 1 still hold every hash of
--     those rows;
--   * the tail, rows ending in (max(compacted_upto, txns_start - 1),
--     last_offset] and inside the window, for the items the runs did not
--     answer (every tail offset is above every run's), searched one of
--     three ways:
--     - a tail of at most 4 096 offsets and more than 2 items: the first aligned match of each
--       item in the rows' hashes concatenated in offset order (its lowest
--       offset there); a misaligned first match falls back to that item's
--       aligned slots in every tail row;
--     - at most 2 items (any tail), or a longer tail (a partition no
--       compaction has reached yet) and at most 32 items: each item
--       searched in each row (its first aligned match there, or that row's
--       aligned slots after a misaligned one), the lowest kept: cost items
--       x tail bytes, no row unrolled, and no aggregate to build per
--       segment (what a bundle of one-item segments pays, one per
--       partition, when it spans 100 k partitions);
--     - a longer tail and more items: unrolled and hash-joined, whose cost
--       does not grow with the item count.
-- The runs name each item's lowest verified occurrence at or below
-- compacted_upto, the tail (for the rest) its lowest above: the lowest
-- in-window occurrence overall is always named, and every name is an
-- in-window occurrence. The statements read later snapshots
-- than statement 1; that only ever shrinks what they find (rows above
-- last_offset are excluded, rows are never rewritten, the window and the
-- purge watermark only move up), and an occurrence that leaves the window
-- after it was named is refuted by the push (see the claim above).
--
-- A candidate's check. A slice with times (created_us, sql/000094) decides
-- it from what the probe already read: the offset o is at or above
-- txns_start and its time at or above the cutoff, both as statement 1 read
-- them. That is the log_txns row check, without reading the row:
--   * txns_start only ever holds a row's base offset (0, or one past the
--     last row a retention step purged) and a partition's rows cover
--     contiguous offsets, so o >= txns_start exactly when o's row ends at
--     or above it, that is, was not purged when statement 1 read;
--   * o <= compacted_upto <= last_offset, so o's row was committed then;
--     rows are never rewritten, so it holds at o the hash the slice holds
--     for o (the slice was built from it), and its created_at is o's time
--     (sql/functions/compaction.sql keeps both).
-- A purge after statement 1 is the case the claim already covers: the name
-- is refuted by the push. A slice without times (NULL: one written before
-- 000094, or by a broker of the previous release) has each candidate read
-- back from its log_txns row, as the push does. Measured on lookups
-- replayed from the window-beyond-budget bench, that row probe was about a
-- quarter of a lookup's time.
CREATE OR REPLACE FUNCTION queen.log_lookup_v2(p_partition_ids bigint[], p_counts integer[], p_hashes bytea, p_item_from bigint[], p_item_to bigint[])
RETURNS TABLE (
    seg_index      integer,
    last_offset    bigint,
    window_seconds integer,
    tail_offsets   bigint,
    found_idx      integer[],
    found_offsets  bigint[])
LANGUAGE plpgsql STABLE
-- No JIT, as log_push_v12 (push.sql): every statement touches a bounded
-- number of rows, and compiling cost more than running. Generic plans: no
-- statement here gains from knowing the arrays' contents, and planning
-- afresh cost about a third of a call. No memoize: the planner cached each
-- run's slice probe keyed on the slice's bytes, which never repeat within a
-- call (every probe a miss), and the keying cost ~20 % of the runs
-- statement.
SET jit = off
SET plan_cache_mode = force_generic_plan
SET enable_memoize = off
AS $$
#variable_conflict use_column
DECLARE
    v_n       integer := coalesce(cardinality(p_partition_ids), 0);
    v_hat     integer[];
    v_last    bigint[];
    v_start   bigint[];
    v_cmp     bigint[];
    v_win     integer[];
    v_cutoff  timestamptz[];
    -- The same cutoffs in microseconds since the Unix epoch, as slices hold times (sql/000094).
    v_cut_us  bigint[];
    v_ords    bigint[];
    -- Per segment: 0 no tail search (window 0), 1 concatenated, 2 per row, 3 hash-joined.
    v_mode    integer[];
    v_total   bigint;
    v_runs    boolean;
    -- What the statements found, aligned: segment (1-based), item, offset.
    v_seg     integer[] := '{}';
    v_idx     integer[] := '{}';
    v_off     bigint[] := '{}';
    v_s       integer[];
    v_i       integer[];
    v_o       bigint[];
    -- Items the runs answered (segment x 2^31 + item), which the tail skips.
    v_found   bigint[] := '{}';
    -- Per segment, the items left for its tail: not answered by the runs,
    -- and with a span that reaches above the tail's start.
    v_need    integer[];
    v_k       integer;
    -- Whether a statement read its rows in the order its aggregates assume.
    v_ordered boolean;
BEGIN
    IF coalesce(cardinality(p_counts), 0) <> v_n THEN
        RAISE EXCEPTION 'log_lookup_v2: argument arrays differ in length' USING ERRCODE = '22023';
    END IF;
    IF v_n = 0 THEN
        RETURN;
    END IF;
    SELECT coalesce(sum(c), 0) INTO v_total FROM unnest(p_counts) AS c;
    IF EXISTS (SELECT 1 FROM unnest(p_counts) AS c WHERE c IS NULL OR c < 0) OR v_total * 16 <> coalesce(length(p_hashes), 0) THEN
        RAISE EXCEPTION 'log_lookup_v2: item counts do not match the hashes' USING ERRCODE = '22023';
    END IF;
    IF (p_item_from IS NOT NULL AND cardinality(p_item_from) <> v_total) OR (p_item_to IS NOT NULL AND cardinality(p_item_to) <> v_total) THEN
        RAISE EXCEPTION 'log_lookup_v2: item spans do not match the item counts' USING ERRCODE = '22023';
    END IF;

    -- Statement 1: the partitions' state, in the bundle's order. No lock:
    -- the values read are committed, which is all the claim needs. The rows
    -- are sorted once, in the subquery, and the aggregates read them in that
    -- order (an aggregate's own ORDER BY sorts its input again, once per
    -- array: ~6 ms a lookup of 1 000 one-item segments). Every array below
    -- is indexed by segment, so that order is checked, not assumed.
    SELECT array_agg(x.hat), array_agg(x.last_offset), array_agg(x.txns_start), array_agg(x.compacted_upto),
           array_agg(x.win), array_agg(x.cutoff), array_agg(x.cut_us), array_agg(x.mode), bool_or(x.runs), array_agg(x.ord)
    INTO v_hat, v_last, v_start, v_cmp, v_win, v_cutoff, v_cut_us, v_mode, v_runs, v_ords
    FROM (
        SELECT s.ord, s.hat, lp.last_offset, lp.txns_start, lp.compacted_upto, q.dedup_window_seconds AS win,
               now() - make_interval(secs => q.dedup_window_seconds) AS cutoff,
               (extract(epoch FROM now() - make_interval(secs => q.dedup_window_seconds)) * 1000000)::bigint AS cut_us,
               CASE WHEN q.dedup_window_seconds <= 0 THEN 0
                    WHEN s.cnt <= 2 THEN 2
                    WHEN lp.last_offset - GREATEST(lp.compacted_upto, lp.txns_start - 1) <= 4096 THEN 1
                    WHEN s.cnt <= 32 THEN 2 ELSE 3 END AS mode,
               q.dedup_window_seconds > 0 AND lp.compacted_upto > lp.txns_start - 1 AS runs
        FROM (
            SELECT u.pid, u.ord, u.cnt, (coalesce(sum(u.cnt) OVER (ORDER BY u.ord ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) * 16 + 1)::integer AS hat
            FROM unnest(p_partition_ids, p_counts) WITH ORDINALITY AS u (pid, cnt, ord)
        ) s
        JOIN queen.log_partitions lp ON lp.id = s.pid
        JOIN queen.queues q ON q.id = lp.queue_id
        ORDER BY s.ord
    ) x;
    IF coalesce(cardinality(v_last), 0) <> v_n THEN
        RAISE EXCEPTION 'log_lookup_v2: unknown partition id' USING ERRCODE = 'P0002';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(v_ords) WITH ORDINALITY AS o (ord, k) WHERE o.ord <> o.k) THEN
        RAISE EXCEPTION 'log_lookup_v2: the partitions'' state was read out of the bundle''s order' USING ERRCODE = 'XX000';
    END IF;

    IF v_runs THEN
        -- The runs. A re-sent id is most often in a partition's oldest,
        -- largest run, so an item's runs are read oldest first (ascending
        -- run_lo: the arrays' order, kept by the ordinality, so LIMIT 1 ends
        -- the search at the first run whose slice holds a verified
        -- occurrence) instead of all of them. That first answer is the
        -- lowest unless a run read later may hold a lower one:
        --   * a run starting below the found offset. Runs hold disjoint
        --     offsets, each above its run_lo, but their spans interleave (a
        --     merge of one level spans a run of another level written
        --     between its parts), so those runs are read too;
        --   * the answering run itself, when its slice held the item more
        --     than once (the unrolled branch, not the direct one): read
        --     again for its lowest, since LIMIT 1 promises no order there.
        -- The lowest over both is named. Every run that could hold a lower
        -- verified occurrence was read, so it is the item's lowest in the
        -- runs. A partition whose runs do not interleave (each starts at or
        -- above the end of every run before it) has no such run after a
        -- direct answer, and reads nothing again. The runs are listed in
        -- this statement's snapshot, as the slices are read: a merge
        -- committing meanwhile is seen whole or not at all.
        WITH seg AS MATERIALIZED (
            SELECT u.ord::integer AS seg, u.pid, u.cnt, u.hat, u.start, u.cmp, u.cutoff, u.cut_us, rr.ids, rr.bits, rr.los, rr.his, rr.nested,
                   (SELECT coalesce(bool_and(x.a <= x.b), true)
                    FROM unnest(rr.los[:cardinality(rr.los) - 1], rr.los[2:]) AS x (a, b)) AS ordered
            FROM unnest(p_partition_ids, p_counts, v_hat, v_start, v_cmp, v_win, v_cutoff, v_cut_us)
                 WITH ORDINALITY AS u (pid, cnt, hat, start, cmp, win, cutoff, cut_us, ord)
            -- The partition's runs in ascending run_lo, and whether any
            -- starts below the end of one before it (spans interleave). The
            -- runs are sorted once, in the subquery, and the aggregates read
            -- them in that order, as statement 1 reads its rows (an
            -- aggregate's own ORDER BY sorts its input again, once per
            -- array); `ordered` checks that order.
            CROSS JOIN LATERAL (
                SELECT array_agg(w.run_id) AS ids, array_agg(w.bits) AS bits,
                       array_agg(w.run_lo) AS los, array_agg(w.run_hi) AS his,
                       coalesce(bool_or(w.run_lo < w.before_hi), false) AS nested
                FROM (
                    SELECT r.run_id, r.bits, r.run_lo, r.run_hi,
                           max(r.run_hi) OVER (ORDER BY r.run_lo ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before_hi
                    FROM queen.log_hash_runs r
                    WHERE r.partition_id = u.pid AND r.run_hi > u.start - 1
                    ORDER BY r.run_lo
                ) w
            ) rr
            WHERE u.win > 0 AND u.cmp > u.start - 1 AND rr.ids IS NOT NULL
        ), items AS MATERIALIZED (
            SELECT s.seg, g.i AS idx, substring(p_hashes FROM s.hat + g.i * 16 FOR 16) AS h,
                   s.pid, s.start, s.cmp, s.cutoff, s.cut_us, s.ids, s.bits, s.los, s.his, s.nested,
                   coalesce(p_item_from[(s.hat - 1) / 16 + g.i + 1], -1) AS ifrom,
                   coalesce(p_item_to[(s.hat - 1) / 16 + g.i + 1], 9223372036854775807) AS ito
            FROM seg s
            CROSS JOIN LATERAL generate_series(0, s.cnt - 1) AS g (i)
        ), first_hits AS MATERIALIZED (
            SELECT q.seg, q.idx, q.h, q.pid, q.start, q.cmp, q.cutoff, q.cut_us, q.ids, q.bits, q.los, q.his, q.nested, q.ifrom, q.ito,
                   f.k, f.off, f.direct
            FROM items q
            CROSS JOIN LATERAL (
                SELECT r.k, c.off, c.direct
                FROM unnest(q.ids, q.bits, q.los, q.his) WITH ORDINALITY AS r (run_id, bits, lo, hi, k)
            -- A parameterised lookup, never a join (as in log_push_v12):
            -- LIMIT 1 keeps the planner from a hash join over every slice.
            CROSS JOIN LATERAL (
                SELECT x.hashes, x.offs, x.created_us, x.pos,
                       CASE WHEN x.pos > 0 THEN position(q.h IN substring(x.hashes FROM x.pos + 1)) ELSE 0 END AS more
                FROM (
                    SELECT sl.hashes, sl.offs, sl.created_us, position(q.h IN sl.hashes) AS pos
                    FROM queen.log_hash_slices sl
                    WHERE sl.run_id = r.run_id AND sl.bucket = queen.log_hash_bucket(q.h, r.bits)
                    LIMIT 1
                ) x
            ) sl
            -- Every occurrence in the slice, where the byte search matched at
            -- all (most new items do not): one aligned match and no other is
            -- read off directly (direct); anything else unrolls the slice.
            CROSS JOIN LATERAL (
                SELECT sl.offs[(sl.pos - 1) / 16 + 1] AS off, sl.created_us[(sl.pos - 1) / 16 + 1] AS at, true AS direct
                WHERE sl.pos > 0 AND (sl.pos - 1) % 16 = 0 AND sl.more = 0
                UNION ALL
                SELECT sl.offs[th.idx + 1] AS off, sl.created_us[th.idx + 1] AS at, false AS direct
                FROM queen.log_unnest_hashes(sl.hashes) th
                WHERE sl.pos > 0 AND ((sl.pos - 1) % 16 <> 0 OR sl.more > 0) AND th.h = q.h
            ) c
            -- The candidate's check (see "A candidate's check" above): from
            -- the slice's time, or, for a slice without times, its log_txns
            -- row (a branch whose gate is false is not run).
            CROSS JOIN LATERAL (
                SELECT true AS ok
                WHERE c.at IS NOT NULL AND c.off >= q.start AND c.at >= q.cut_us
                UNION ALL
                SELECT true AS ok
                FROM (
                    SELECT t.base_offset, t.end_offset, t.created_at,
                           CASE WHEN t.base_offset <= c.off
                                THEN substring(t.hashes FROM ((c.off - t.base_offset) * 16 + 1)::integer FOR 16) END AS hash
                    FROM queen.log_txns t
                    WHERE t.partition_id = q.pid
                      AND t.end_offset >= c.off
                    ORDER BY t.end_offset
                    LIMIT 1
                ) t
                WHERE c.at IS NULL
                  AND t.base_offset <= c.off
                  AND t.end_offset >= q.start
                  AND t.created_at >= q.cutoff
                  AND t.hash = q.h
            ) v
            -- Only the runs holding some offset of the item's span, (lo, hi]
            -- against [ifrom, ito] (a qual on the runs alone: the slice is
            -- not probed for the others).
            WHERE r.hi >= q.ifrom AND r.lo < q.ito
              AND c.off <= q.cmp
                ORDER BY r.k
                LIMIT 1
            ) f
        )
        SELECT array_agg(f.seg), array_agg(f.idx), array_agg(LEAST(f.off, o.off)), (SELECT bool_and(s.ordered) FROM seg s)
        INTO v_s, v_i, v_o, v_ordered
        FROM first_hits f
        CROSS JOIN LATERAL (
            SELECT min(c.off) AS off
            FROM unnest(f.ids, f.bits, f.los, f.his) WITH ORDINALITY AS r (run_id, bits, lo, hi, k)
            CROSS JOIN LATERAL (
                SELECT x.hashes, x.offs, x.created_us, x.pos,
                       CASE WHEN x.pos > 0 THEN position(f.h IN substring(x.hashes FROM x.pos + 1)) ELSE 0 END AS more
                FROM (
                    SELECT sl.hashes, sl.offs, sl.created_us, position(f.h IN sl.hashes) AS pos
                    FROM queen.log_hash_slices sl
                    WHERE sl.run_id = r.run_id AND sl.bucket = queen.log_hash_bucket(f.h, r.bits)
                    LIMIT 1
                ) x
            ) sl
            CROSS JOIN LATERAL (
                SELECT sl.offs[(sl.pos - 1) / 16 + 1] AS off, sl.created_us[(sl.pos - 1) / 16 + 1] AS at
                WHERE sl.pos > 0 AND (sl.pos - 1) % 16 = 0 AND sl.more = 0
                UNION ALL
                SELECT sl.offs[th.idx + 1] AS off, sl.created_us[th.idx + 1] AS at
                FROM queen.log_unnest_hashes(sl.hashes) th
                WHERE sl.pos > 0 AND ((sl.pos - 1) % 16 <> 0 OR sl.more > 0) AND th.h = f.h
            ) c
            CROSS JOIN LATERAL (
                SELECT true AS ok
                WHERE c.at IS NOT NULL AND c.off >= f.start AND c.at >= f.cut_us
                UNION ALL
                SELECT true AS ok
                FROM (
                    SELECT t.base_offset, t.end_offset, t.created_at,
                           CASE WHEN t.base_offset <= c.off
                                THEN substring(t.hashes FROM ((c.off - t.base_offset) * 16 + 1)::integer FOR 16) END AS hash
                    FROM queen.log_txns t
                    WHERE t.partition_id = f.pid
                      AND t.end_offset >= c.off
                    ORDER BY t.end_offset
                    LIMIT 1
                ) t
                WHERE c.at IS NULL
                  AND t.base_offset <= c.off
                  AND t.end_offset >= f.start
                  AND t.created_at >= f.cutoff
                  AND t.hash = f.h
            ) v
            WHERE r.hi >= f.ifrom AND r.lo < f.ito
              AND c.off <= f.cmp
              AND ((r.k = f.k AND NOT f.direct) OR (r.k > f.k AND r.lo < f.off))
              -- Runs that do not interleave start at or above the end of
              -- every run before them, so above the found offset: nothing
              -- to read again after a direct answer.
              AND (f.nested OR NOT f.direct)
        ) o;
        IF NOT coalesce(v_ordered, true) THEN
            RAISE EXCEPTION 'log_lookup_v2: a partition''s runs were read out of run_lo order' USING ERRCODE = 'XX000';
        END IF;
        IF v_s IS NOT NULL THEN
            v_seg := v_seg || v_s;
            v_idx := v_idx || v_i;
            v_off := v_off || v_o;
            v_found := ARRAY(SELECT x.seg::bigint * 2147483648 + x.idx FROM unnest(v_s, v_i) AS x (seg, idx));
        END IF;
    END IF;

    IF v_s IS NOT NULL OR p_item_to IS NOT NULL THEN
        -- Which items the tail still has to answer. An item the runs
        -- answered needs no tail search: every tail offset is above
        -- compacted_upto, every run's at or below it. Nor does one whose
        -- span ends at or below the tail's start: it has no tail offset. A
        -- segment with no item left skips the tail.
        -- One pass over the items (a set-returning call in the select
        -- list, not a subquery per segment: a lookup of 1 000 one-item
        -- segments runs this too).
        SELECT array_agg(coalesce(n.left_items, 0) ORDER BY u.ord) INTO v_need
        FROM generate_series(1, v_n) AS u (ord)
        LEFT JOIN (
            SELECT x.ord, count(*)::integer AS left_items
            FROM (
                SELECT s.ord, s.hat, GREATEST(s.cmp, s.start - 1) AS tail_from, generate_series(0, s.cnt - 1) AS i
                FROM unnest(p_counts, v_hat, v_cmp, v_start) WITH ORDINALITY AS s (cnt, hat, cmp, start, ord)
            ) x
            WHERE NOT (x.ord * 2147483648 + x.i) = ANY (v_found)
              AND coalesce(p_item_to[(x.hat - 1) / 16 + x.i + 1], 9223372036854775807) > x.tail_from
            GROUP BY x.ord
        ) n ON n.ord = u.ord;
        FOR v_k IN 1 .. v_n LOOP
            IF v_need[v_k] = 0 THEN
                v_mode[v_k] := 0;
            END IF;
        END LOOP;
    END IF;

    IF 1 = ANY (v_mode) THEN
        -- Tails of at most 4 096 offsets: the rows concatenated per segment,
        -- each item's first aligned match (its lowest offset there), or
        -- after a misaligned first match that item's aligned slots in every
        -- row (log_push_v12's batched probe). The rows are read in offset
        -- order once, in the subquery, and the three aggregates read them
        -- in that order (one sort a segment instead of three); `ordered`
        -- checks it (rows hold disjoint offsets, so ascending bases are
        -- ascending rows), as the first match is the lowest only then.
        WITH cat AS MATERIALIZED (
            SELECT u.ord::integer AS seg, u.pid, u.cnt, u.hat, u.tail_from, u.last, u.cutoff, r.allh, r.bases, r.lens,
                   (SELECT coalesce(bool_and(x.a < x.b), true)
                    FROM unnest(r.bases[:cardinality(r.bases) - 1], r.bases[2:]) AS x (a, b)) AS ordered
            FROM unnest(p_partition_ids, p_counts, v_hat, v_last, v_start, v_cmp, v_cutoff, v_mode)
                 WITH ORDINALITY AS u0 (pid, cnt, hat, last, start, cmp, cutoff, mode, ord)
            CROSS JOIN LATERAL (SELECT u0.*, GREATEST(u0.cmp, u0.start - 1) AS tail_from) u
            CROSS JOIN LATERAL (
                SELECT string_agg(t.hashes, ''::bytea) AS allh,
                       array_agg(t.base_offset) AS bases,
                       array_agg(octet_length(t.hashes) / 16) AS lens
                FROM (
                    SELECT t.hashes, t.base_offset
                    FROM queen.log_txns t
                    WHERE t.partition_id = u.pid AND t.end_offset > u.tail_from AND t.end_offset <= u.last
                      AND t.created_at >= u.cutoff
                    ORDER BY t.end_offset
                ) t
            ) r
            WHERE u.mode = 1 AND r.allh IS NOT NULL
        ), hits AS (
            SELECT c.seg, c.idx, x.off
            FROM (
                SELECT k.seg, g.i AS idx, ih.h, k.pid, k.tail_from, k.last, k.cutoff, k.bases, k.lens, position(ih.h IN k.allh) AS pos
                FROM cat k
                CROSS JOIN LATERAL generate_series(0, k.cnt - 1) AS g (i)
                CROSS JOIN LATERAL (SELECT substring(p_hashes FROM k.hat + g.i * 16 FOR 16) AS h) ih
                WHERE NOT (k.seg::bigint * 2147483648 + g.i) = ANY (v_found)
                  AND coalesce(p_item_to[(k.hat - 1) / 16 + g.i + 1], 9223372036854775807) > k.tail_from
                OFFSET 0
            ) c
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
                  AND t.partition_id = c.pid AND t.end_offset > c.tail_from AND t.end_offset <= c.last
                  AND t.created_at >= c.cutoff
                  AND th.h = c.h
            ) x
            WHERE c.pos > 0 AND x.off IS NOT NULL
        )
        SELECT array_agg(h.seg), array_agg(h.idx), array_agg(h.off), (SELECT bool_and(k.ordered) FROM cat k)
        INTO v_s, v_i, v_o, v_ordered
        FROM hits h;
        IF NOT coalesce(v_ordered, true) THEN
            RAISE EXCEPTION 'log_lookup_v2: a tail''s rows were read out of offset order' USING ERRCODE = 'XX000';
        END IF;
        IF v_s IS NOT NULL THEN
            v_seg := v_seg || v_s;
            v_idx := v_idx || v_i;
            v_off := v_off || v_o;
        END IF;
    END IF;

    IF 2 = ANY (v_mode) THEN
        -- At most 2 items, or longer tails and at most 32 items: one byte search per (item, row),
        -- the lowest match kept; a misaligned first match in a row falls
        -- back to that row's aligned slots.
        WITH seg AS MATERIALIZED (
            SELECT u.ord::integer AS seg, u.pid, u.cnt, u.hat, GREATEST(u.cmp, u.start - 1) AS tail_from, u.last, u.cutoff
            FROM unnest(p_partition_ids, p_counts, v_hat, v_last, v_start, v_cmp, v_cutoff, v_mode)
                 WITH ORDINALITY AS u (pid, cnt, hat, last, start, cmp, cutoff, mode, ord)
            WHERE u.mode = 2
        ), hits AS (
            SELECT c.seg, c.idx, min(x.off) AS off
            FROM (
                SELECT s.seg, g.i AS idx, ih.h, t.base_offset, t.hashes, position(ih.h IN t.hashes) AS pos
                FROM seg s
                CROSS JOIN LATERAL generate_series(0, s.cnt - 1) AS g (i)
                CROSS JOIN LATERAL (SELECT substring(p_hashes FROM s.hat + g.i * 16 FOR 16) AS h) ih
                JOIN queen.log_txns t
                  ON t.partition_id = s.pid AND t.end_offset > s.tail_from AND t.end_offset <= s.last AND t.created_at >= s.cutoff
                WHERE NOT (s.seg::bigint * 2147483648 + g.i) = ANY (v_found)
                  AND coalesce(p_item_to[(s.hat - 1) / 16 + g.i + 1], 9223372036854775807) > s.tail_from
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
            GROUP BY c.seg, c.idx
        )
        SELECT array_agg(h.seg), array_agg(h.idx), array_agg(h.off) INTO v_s, v_i, v_o FROM hits h;
        IF v_s IS NOT NULL THEN
            v_seg := v_seg || v_s;
            v_idx := v_idx || v_i;
            v_off := v_off || v_o;
        END IF;
    END IF;

    IF 3 = ANY (v_mode) THEN
        -- Longer tails, more items: unrolled into narrow rows, then
        -- hash-joined with the items (log_push_v12's joined probe).
        WITH seg AS MATERIALIZED (
            SELECT u.ord::integer AS seg, u.pid, u.cnt, u.hat, GREATEST(u.cmp, u.start - 1) AS tail_from, u.last, u.cutoff
            FROM unnest(p_partition_ids, p_counts, v_hat, v_last, v_start, v_cmp, v_cutoff, v_mode)
                 WITH ORDINALITY AS u (pid, cnt, hat, last, start, cmp, cutoff, mode, ord)
            WHERE u.mode = 3
        ), tail AS MATERIALIZED (
            SELECT s.seg, t.base_offset + th.idx AS off, th.h
            FROM seg s
            JOIN queen.log_txns t
              ON t.partition_id = s.pid AND t.end_offset > s.tail_from AND t.end_offset <= s.last AND t.created_at >= s.cutoff
            CROSS JOIN LATERAL queen.log_unnest_hashes(t.hashes) th
        ), items AS (
            SELECT s.seg, g.i AS idx, substring(p_hashes FROM s.hat + g.i * 16 FOR 16) AS h
            FROM seg s
            CROSS JOIN LATERAL generate_series(0, s.cnt - 1) AS g (i)
            WHERE NOT (s.seg::bigint * 2147483648 + g.i) = ANY (v_found)
              AND coalesce(p_item_to[(s.hat - 1) / 16 + g.i + 1], 9223372036854775807) > s.tail_from
        ), hits AS (
            SELECT q.seg, q.idx, min(lt.off) AS off
            FROM tail lt
            JOIN items q ON q.seg = lt.seg AND q.h = lt.h
            GROUP BY q.seg, q.idx
        )
        SELECT array_agg(h.seg), array_agg(h.idx), array_agg(h.off) INTO v_s, v_i, v_o FROM hits h;
        IF v_s IS NOT NULL THEN
            v_seg := v_seg || v_s;
            v_idx := v_idx || v_i;
            v_off := v_off || v_o;
        END IF;
    END IF;

    RETURN QUERY
    SELECT (u.ord - 1)::integer,
           u.last,
           u.win,
           CASE WHEN u.win > 0 THEN GREATEST(u.last - GREATEST(u.cmp, u.start - 1), 0) ELSE 0 END,
           f.idx,
           f.offs
    FROM unnest(v_last, v_win, v_cmp, v_start) WITH ORDINALITY AS u (last, win, cmp, start, ord)
    LEFT JOIN (
        SELECT d.seg, array_agg(d.idx ORDER BY d.idx, d.off) AS idx, array_agg(d.off ORDER BY d.idx, d.off) AS offs
        FROM (SELECT DISTINCT h.seg, h.idx, h.off FROM unnest(v_seg, v_idx, v_off) AS h (seg, idx, off)) d
        GROUP BY d.seg
    ) f ON f.seg = u.ord
    ORDER BY u.ord;
END
$$;

-- rolling-upgrade predecessor: queen.log_lookup_v1
-- The previous release's lookup: version 2 with no item spans (every item
-- searched over its whole window), which is what version 1 did.
CREATE OR REPLACE FUNCTION queen.log_lookup_v1(p_partition_ids bigint[], p_counts integer[], p_hashes bytea)
RETURNS TABLE (
    seg_index      integer,
    last_offset    bigint,
    window_seconds integer,
    tail_offsets   bigint,
    found_idx      integer[],
    found_offsets  bigint[])
LANGUAGE sql STABLE
AS $$
    SELECT * FROM queen.log_lookup_v2(p_partition_ids, p_counts, p_hashes, NULL::bigint[], NULL::bigint[])
$$;
