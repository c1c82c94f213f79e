-- 000025: retention step version 3 (docs/retention.md, "Concurrent steps").
--
-- The retention leader now runs steps for distinct partitions on several
-- sessions at once. retention_step_v2 ended every step that removed
-- something by upserting its QUEUE's queen.retention_stats row: two steps
-- on partitions of the same queue (the common case: one busy queue, many
-- partitions) then waited on that row, the second until the first had
-- committed, so their commits (each a WAL flush) ran one after another and
-- concurrency bought little. Version 3 is version 2 with one change: the
-- totals go to a row PER PARTITION (queen.retention_partition_stats), which
-- only the step holding that partition's row lock ever writes. Concurrent
-- steps on distinct partitions now share no row at all: each locks its
-- partition row, then that partition's cursor rows FOR SHARE, then touches
-- only that partition's segments, sidecar rows and totals row. Lock order
-- and the per-step bounds are exactly version 2's.
--
-- queen.queue_retention_get_v2 reports per queue the sum of the old
-- per-queue totals (what steps before this migration removed) and the new
-- per-partition ones. retention_step_v2 and queue_retention_get_v1 stay in
-- the database unused.

CREATE TABLE queen.retention_partition_stats (
    partition_id      bigint      PRIMARY KEY REFERENCES queen.log_partitions (id),
    queue_id          bigint      NOT NULL REFERENCES queen.queues (id),
    segments_removed  bigint      NOT NULL DEFAULT 0,
    messages_removed  bigint      NOT NULL DEFAULT 0,
    bytes_removed     bigint      NOT NULL DEFAULT 0,
    txns_rows_removed bigint      NOT NULL DEFAULT 0,
    last_removal_at   timestamptz
);
CREATE INDEX retention_partition_stats_queue ON queen.retention_partition_stats (queue_id);

-- One bounded retention step on one partition: retention_step_v2 (000022,
-- whose header argues it) with per-partition totals.
CREATE FUNCTION queen.retention_step_v3(p_partition_id bigint, p_max_rows integer, p_max_bytes bigint)
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
        -- This partition's own totals row (v2 updated ONE row per queue here,
        -- which made concurrent steps of one queue wait for each other's commit).
        INSERT INTO queen.retention_partition_stats AS rs (partition_id, queue_id, segments_removed, messages_removed, bytes_removed, txns_rows_removed, last_removal_at)
        VALUES (p_partition_id, v_queue, segments_removed, messages_removed, bytes_removed, txns_rows_removed, v_now)
        ON CONFLICT (partition_id) DO UPDATE
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

-- Retention options and state of one queue (GET /api/v1/resources/queues/:queue):
-- queue_retention_get_v1 plus the per-partition totals of retention_step_v3.
CREATE FUNCTION queen.queue_retention_get_v2(p_queue text)
RETURNS TABLE (
    retention_seconds           integer,
    completed_retention_seconds integer,
    segments_removed            bigint,
    messages_removed            bigint,
    bytes_removed               bigint,
    txns_rows_removed           bigint,
    last_removal_at             timestamptz,
    purge_lag_seconds           double precision,
    oldest_retained_age_seconds double precision)
LANGUAGE sql STABLE
AS $$
    SELECT q.retention_seconds, q.completed_retention_seconds,
           (coalesce(rs.segments_removed, 0) + ps.segments_removed)::bigint,
           (coalesce(rs.messages_removed, 0) + ps.messages_removed)::bigint,
           (coalesce(rs.bytes_removed, 0) + ps.bytes_removed)::bigint,
           (coalesce(rs.txns_rows_removed, 0) + ps.txns_rows_removed)::bigint,
           GREATEST(rs.last_removal_at, ps.last_removal_at),
           l.purge_lag_seconds, l.oldest_retained_age_seconds
    FROM queen.queues q
    LEFT JOIN queen.retention_stats rs ON rs.queue_id = q.id
    CROSS JOIN LATERAL (
        SELECT coalesce(sum(p.segments_removed), 0) AS segments_removed,
               coalesce(sum(p.messages_removed), 0) AS messages_removed,
               coalesce(sum(p.bytes_removed), 0) AS bytes_removed,
               coalesce(sum(p.txns_rows_removed), 0) AS txns_rows_removed,
               max(p.last_removal_at) AS last_removal_at
        FROM queen.retention_partition_stats p
        WHERE p.queue_id = q.id) ps
    CROSS JOIN LATERAL queen.retention_lag_v1(q.id) l
    WHERE q.name = p_queue
$$;
