-- 000022: retention step version 2 (docs/retention.md): completed data.
--
-- retention_step_v1 removed segments by age only (retentionSeconds).
-- Version 2 also removes whole segments that EVERY consumer group of the
-- queue has completed, once they are older than completedRetentionSeconds.
--
-- "Completed" for one partition: the smallest committed_offset over the
-- cursors of every consumer group of the queue (queen.log_groups; queue mode
-- is the group '__QUEUE_MODE__' and counts as one group like any other). A
-- segment is completed when its end_offset is at or below that minimum.
--   * A partition with no cursor at all (no group has ever read it) has
--     nothing completed.
--   * A group of the queue that has no cursor on this partition yet (it has
--     not popped it) has completed nothing there, so nothing is completed.
--   * Offsets settled out of order above committed_offset do not count.
-- committed_offset only ever rises (acks move it over a contiguous settled
-- prefix; a pop that skips to log_start raises it), so a minimum read at any
-- moment is a lower bound of every cursor's position from then on: no cursor
-- can later need an offset at or below it.
--
-- The cursor rows of the partition are read FOR SHARE, after the partition
-- row (the global order: partition rows, then cursor rows). A pop takes its
-- cursor row FOR UPDATE SKIP LOCKED and an ack updates it, so a step and a
-- pop or ack of this partition are serialised: a pop either ran entirely
-- before the step (the segments it delivered existed) or it runs after the
-- step committed and reads the raised log_start. This also closes, for
-- age-based removal, the window in which a pop could lease a span whose
-- segments a step removed between the pop's statements.
--
-- A step is also bounded by bytes: at most p_max_rows segments AND, past the
-- first segment, no more than p_max_bytes of segment blobs (octet_length
-- reads the TOAST pointer's size, not the data). Deleting a segment costs in
-- proportion to its TOASTed blob, so a row count alone let a step of large
-- segments hold the row lock for tens of milliseconds (docs/retention.md,
-- "How long a step holds the lock").
--
-- Everything else is as in version 1: one partition row lock per step, only
-- a contiguous prefix is removed, at most p_max_rows log_txns rows,
-- log_start / txns_start rise in the same transaction, the log_txns horizon
-- is GREATEST(dedup window, completedRetentionSeconds, 900 s).

CREATE FUNCTION queen.retention_candidates_v2(p_after bigint, p_limit integer)
RETURNS TABLE (partition_id bigint, last_id bigint)
LANGUAGE sql STABLE
AS $$
    WITH page AS (
        SELECT lp.id, lp.log_start, lp.txns_start, q.retention_seconds, q.completed_retention_seconds,
               GREATEST(q.dedup_window_seconds, q.completed_retention_seconds, queen.retention_txns_floor_seconds_v1()) AS txns_seconds
        FROM queen.log_partitions lp
        JOIN queen.queues q ON q.id = lp.queue_id
        WHERE lp.id > p_after
        ORDER BY lp.id
        LIMIT p_limit
    )
    SELECT p.id, (SELECT max(id) FROM page)
    FROM page p
    CROSS JOIN LATERAL (
        SELECT s.created_at, s.end_offset FROM queen.log_segments s
        WHERE s.partition_id = p.id AND s.base_offset >= p.log_start
        ORDER BY s.base_offset LIMIT 1) f
    WHERE (p.retention_seconds > 0 AND f.created_at < now() - make_interval(secs => p.retention_seconds))
       OR (p.completed_retention_seconds > 0
           AND f.created_at < now() - make_interval(secs => p.completed_retention_seconds)
           -- Cheap pre-check only (the step decides under its locks): some
           -- cursor is past the first segment.
           AND EXISTS (SELECT 1 FROM queen.log_cursors c
                       WHERE c.partition_id = p.id AND c.committed_offset >= f.end_offset))
    UNION
    SELECT p.id, (SELECT max(id) FROM page)
    FROM page p
    WHERE EXISTS (
              SELECT 1 FROM (
                  SELECT t.created_at FROM queen.log_txns t
                  WHERE t.partition_id = p.id AND t.end_offset >= p.txns_start
                  ORDER BY t.end_offset LIMIT 1) f
              WHERE f.created_at < now() - make_interval(secs => p.txns_seconds))
    UNION ALL
    -- One row that only carries the page's last id, so the caller can page on
    -- even when no partition of the page needs work.
    SELECT NULL, (SELECT max(id) FROM page)
    ORDER BY 1 NULLS LAST
$$;

-- The completed offset of one partition for every group of its queue (see
-- the header): -1 when nothing is completed. Takes the partition's cursor
-- rows FOR SHARE in ascending group order; the caller holds the partition
-- row lock already.
CREATE FUNCTION queen.retention_completed_upto_v2(p_partition_id bigint, p_queue_id bigint)
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    v_min bigint;
BEGIN
    SELECT min(c.committed_offset) INTO v_min
    FROM (SELECT c.committed_offset FROM queen.log_cursors c
          WHERE c.partition_id = p_partition_id
          ORDER BY c.consumer_group
          FOR SHARE) c;
    IF v_min IS NULL THEN
        RETURN -1; -- no group has ever read this partition
    END IF;
    IF EXISTS (SELECT 1 FROM queen.log_groups g
               WHERE g.queue_id = p_queue_id
                 AND NOT EXISTS (SELECT 1 FROM queen.log_cursors c
                                 WHERE c.partition_id = p_partition_id AND c.consumer_group = g.consumer_group)) THEN
        RETURN -1; -- a group of the queue has not read this partition yet
    END IF;
    RETURN v_min;
END
$$;

-- One bounded retention step on one partition (see the header; the output
-- is version 1's, plus completed_upto: the completed offset the step used,
-- -1 when nothing was completed or completedRetentionSeconds is 0).
CREATE FUNCTION queen.retention_step_v2(p_partition_id bigint, p_max_rows integer, p_max_bytes bigint)
RETURNS TABLE (
    queue_name        text,
    segments_removed  integer,
    messages_removed  bigint,
    bytes_removed     bigint,
    txns_rows_removed integer,
    log_start         bigint,
    txns_start        bigint,
    more              boolean,
    completed_upto    bigint)
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
    v_queue     bigint;
    v_qname     text;
    v_start     bigint;
    v_tstart    bigint;
    v_ret       integer;
    v_cret      integer;
    v_txns_secs integer;
    v_now       timestamptz;
    v_done      bigint := -1;
    v_cut       bigint;
    v_cut_all   bigint;
    v_more      boolean := false;
BEGIN
    -- The partition row lock: the same serializer the push takes, so a push
    -- sees either all of this step or none of it.
    SELECT lp.queue_id, q.name, lp.log_start, lp.txns_start, q.retention_seconds, q.completed_retention_seconds,
           GREATEST(q.dedup_window_seconds, q.completed_retention_seconds, queen.retention_txns_floor_seconds_v1())
    INTO v_queue, v_qname, v_start, v_tstart, v_ret, v_cret, v_txns_secs
    FROM queen.log_partitions lp
    JOIN queen.queues q ON q.id = lp.queue_id
    WHERE lp.id = p_partition_id
    FOR UPDATE OF lp;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    v_now := clock_timestamp();

    segments_removed := 0;
    messages_removed := 0;
    bytes_removed := 0;
    txns_rows_removed := 0;

    IF v_ret > 0 OR v_cret > 0 THEN
        -- Serialise with this partition's pops and acks (header), and read
        -- how far every group has completed.
        v_done := queen.retention_completed_upto_v2(p_partition_id, v_queue);
        IF v_cret = 0 THEN
            v_done := -1;
        END IF;
        SELECT max(h.end_offset) FILTER (WHERE h.prefix_gone AND h.bytes_before < p_max_bytes),
               max(h.end_offset) FILTER (WHERE h.prefix_gone)
        INTO v_cut, v_cut_all
        FROM (
            SELECT s.end_offset,
                   bool_and(
                       (v_ret > 0 AND s.created_at < v_now - make_interval(secs => v_ret))
                    OR (v_cret > 0 AND s.end_offset <= v_done AND s.created_at < v_now - make_interval(secs => v_cret))
                   ) OVER (ORDER BY s.base_offset) AS prefix_gone,
                   -- Bytes of the segments before this one (so the first always fits).
                   sum(s.b) OVER (ORDER BY s.base_offset) - s.b AS bytes_before
            FROM (
                SELECT s.base_offset, s.end_offset, s.created_at, octet_length(s.blob)::bigint AS b
                FROM queen.log_segments s
                WHERE s.partition_id = p_partition_id AND s.base_offset >= v_start
                ORDER BY s.base_offset
                LIMIT p_max_rows
            ) s
        ) h;
        IF v_cut IS NOT NULL THEN
            WITH d AS (
                DELETE FROM queen.log_segments s
                WHERE s.partition_id = p_partition_id AND s.base_offset >= v_start AND s.base_offset <= v_cut
                RETURNING s.end_offset - s.base_offset + 1 AS n, octet_length(s.blob) AS b
            )
            SELECT count(*), coalesce(sum(d.n), 0), coalesce(sum(d.b), 0)
            INTO segments_removed, messages_removed, bytes_removed
            FROM d;
            v_start := v_cut + 1;
            -- Full by rows, or stopped by the byte budget before the end of what is gone.
            v_more := segments_removed = p_max_rows OR v_cut < v_cut_all;
        END IF;
    END IF;

    v_cut := NULL;
    SELECT max(h.end_offset) FILTER (WHERE h.prefix_old)
    INTO v_cut
    FROM (
        SELECT t.end_offset,
               bool_and(t.created_at < v_now - make_interval(secs => v_txns_secs)) OVER (ORDER BY t.end_offset) AS prefix_old
        FROM (
            SELECT t.end_offset, t.created_at
            FROM queen.log_txns t
            WHERE t.partition_id = p_partition_id AND t.end_offset >= v_tstart
            ORDER BY t.end_offset
            LIMIT p_max_rows
        ) t
    ) h;
    IF v_cut IS NOT NULL THEN
        DELETE FROM queen.log_txns t
        WHERE t.partition_id = p_partition_id AND t.end_offset >= v_tstart AND t.end_offset <= v_cut;
        GET DIAGNOSTICS txns_rows_removed = ROW_COUNT;
        v_tstart := v_cut + 1;
        v_more := v_more OR txns_rows_removed = p_max_rows;
    END IF;

    IF segments_removed > 0 OR txns_rows_removed > 0 THEN
        UPDATE queen.log_partitions lp SET log_start = v_start, txns_start = v_tstart WHERE lp.id = p_partition_id;
        INSERT INTO queen.retention_stats AS rs (queue_id, segments_removed, messages_removed, bytes_removed, txns_rows_removed, last_removal_at)
        VALUES (v_queue, segments_removed, messages_removed, bytes_removed, txns_rows_removed, v_now)
        ON CONFLICT (queue_id) DO UPDATE
        SET segments_removed = rs.segments_removed + EXCLUDED.segments_removed,
            messages_removed = rs.messages_removed + EXCLUDED.messages_removed,
            bytes_removed = rs.bytes_removed + EXCLUDED.bytes_removed,
            txns_rows_removed = rs.txns_rows_removed + EXCLUDED.txns_rows_removed,
            last_removal_at = EXCLUDED.last_removal_at;
    END IF;

    queue_name := v_qname;
    log_start := v_start;
    txns_start := v_tstart;
    more := v_more;
    completed_upto := v_done;
    RETURN NEXT;
END
$$;
