-- The retention family (docs/retention.md): the bounded step, the
-- candidates scan, lag and the per-queue options. How this file is applied:
-- docs/sql-layout.md.
--
-- Two independent removals, each a bounded step under the partition's row
-- lock (one partition row per step, so the global order holds trivially):
--   * segments past the queue's limits are removed from the front of the
--     partition, whole segments only, and log_start rises past them: older
--     than retention_seconds (0 = keep), or completed by EVERY consumer
--     group of the queue and older than completed_retention_seconds;
--   * log_txns rows older than GREATEST(window, completed retention, 900 s)
--     are purged from the front, and txns_start rises to the first kept
--     offset. The push probe's lower bound is txns_start - 1, so the probe
--     never looks below it; every purged row was already outside the window.
--
-- "Completed" for one partition: the smallest committed_offset over the
-- cursors of every group of the queue; a group without a cursor there has
-- completed nothing. committed_offset only rises, so that minimum is a lower
-- bound of every cursor from then on. The cursor rows are read FOR SHARE
-- after the partition row (partition rows, then cursor rows: the global
-- order), which serialises a step with a pop or ack of the same partition.
--
-- A step is bounded by rows and, past its first segment, by bytes of blob,
-- so it holds the row lock briefly. Totals go to a row per partition
-- (retention_partition_stats), which only the step holding that partition's
-- lock writes, so concurrent steps on distinct partitions share no row.
--
-- Live: retention_step_v3, retention_candidates_v2, retention_overview_v1,
-- queue_retention_get_v2, queue_retention_configure_v1
-- (src/engine/retentionStore.ts), and the helpers they call.
-- Earlier versions: sql/000020, sql/000022, sql/000025.

-- The smallest txns horizon whatever the configuration: a purge never
-- removes log_txns rows younger than this.
CREATE OR REPLACE FUNCTION queen.retention_txns_floor_seconds_v1()
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT 900 $$;

-- How far behind retention is on one queue: the seconds its oldest kept
-- log_txns row is past its horizon (0 when retention keeps up), and the age
-- of its oldest retained segment. One index lookup per partition and table.
CREATE OR REPLACE FUNCTION queen.retention_lag_v1(p_queue_id bigint)
RETURNS TABLE (purge_lag_seconds double precision, oldest_retained_age_seconds double precision)
LANGUAGE sql STABLE
AS $$
    SELECT coalesce((
               SELECT max(GREATEST(0, extract(epoch FROM now() - ft.created_at)
                                     - GREATEST(q.dedup_window_seconds, q.completed_retention_seconds, queen.retention_txns_floor_seconds_v1())))
               FROM queen.log_partitions lp
               CROSS JOIN LATERAL (
                   SELECT t.created_at FROM queen.log_txns t
                   WHERE t.partition_id = lp.id AND t.end_offset >= lp.txns_start
                   ORDER BY t.end_offset LIMIT 1) ft
               WHERE lp.queue_id = q.id), 0)::double precision,
           coalesce((
               SELECT max(extract(epoch FROM now() - fs.created_at))
               FROM queen.log_partitions lp
               CROSS JOIN LATERAL (
                   SELECT s.created_at FROM queen.log_segments s
                   WHERE s.partition_id = lp.id AND s.base_offset >= lp.log_start
                   ORDER BY s.base_offset LIMIT 1) fs
               WHERE lp.queue_id = q.id), 0)::double precision
    FROM queen.queues q
    WHERE q.id = p_queue_id
$$;

-- Partitions (id > p_after, ascending, at most p_limit) whose front holds
-- something past its limit: a segment older than retention_seconds, a
-- segment completed by every group and older than
-- completed_retention_seconds, or a log_txns row older than the txns
-- horizon. Reads only the first rows of each (index order, starting at
-- log_start / txns_start so dead index entries of earlier purges are not
-- walked); locks nothing.
CREATE OR REPLACE FUNCTION queen.retention_candidates_v2(p_after bigint, p_limit integer)
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

-- The completed offset of one partition for every group of its queue (see the
-- header): -1 when nothing is completed. Takes the partition's cursor
-- rows FOR SHARE in ascending group order; the caller holds the partition
-- row lock already.
CREATE OR REPLACE FUNCTION queen.retention_completed_upto_v2(p_partition_id bigint, p_queue_id bigint)
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

-- One bounded retention step on one partition (see the header): one
-- transaction, one row lock, at most p_max_rows segments (and, past the
-- first, p_max_bytes of blob) and p_max_rows log_txns rows removed. Only a
-- prefix of the partition is ever removed, so what is kept is always a
-- contiguous suffix starting at log_start / txns_start.
--
-- more = a batch was full: the caller should step this partition again.
-- completed_upto: the completed offset the step used (-1 when nothing was
-- completed or completed_retention_seconds is 0).
CREATE OR REPLACE FUNCTION queen.retention_step_v3(p_partition_id bigint, p_max_rows integer, p_max_bytes bigint)
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

-- Every queue's lag (the leader's per-queue gauges, after each pass).
CREATE OR REPLACE FUNCTION queen.retention_overview_v1()
RETURNS TABLE (queue_name text, purge_lag_seconds double precision, oldest_retained_age_seconds double precision)
LANGUAGE sql STABLE
AS $$
    SELECT q.name, l.purge_lag_seconds, l.oldest_retained_age_seconds
    FROM queen.queues q
    CROSS JOIN LATERAL queen.retention_lag_v1(q.id) l
    ORDER BY q.name
$$;

-- Retention options and state of one queue (GET /api/v1/resources/queues/:queue):
-- the totals are the old per-queue rows (steps before sql/000025) plus the
-- per-partition ones.
CREATE OR REPLACE FUNCTION queen.queue_retention_get_v2(p_queue text)
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

-- Sets the retention options of an existing queue (the row queue_configure_v1
-- just created or locked, in the same transaction). Same rules as /configure:
-- a present key sets (JSON null: the default, 0); an omitted key keeps its
-- value unless p_reset (a create or mode "replace"), where it takes 0.
CREATE OR REPLACE FUNCTION queen.queue_retention_configure_v1(p_queue text, p_options jsonb, p_reset boolean)
RETURNS TABLE (retention_seconds integer, completed_retention_seconds integer)
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
    v_id   bigint;
    v_ret  integer;
    v_cret integer;
BEGIN
    SELECT q.id, q.retention_seconds, q.completed_retention_seconds INTO v_id, v_ret, v_cret
    FROM queen.queues q WHERE q.name = p_queue
    FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'queue_retention_configure_v1: queue % does not exist', p_queue USING ERRCODE = 'P0002';
    END IF;
    IF p_options ? 'retentionSeconds' THEN
        v_ret := coalesce((p_options ->> 'retentionSeconds')::integer, 0);
    ELSIF p_reset THEN
        v_ret := 0;
    END IF;
    IF p_options ? 'completedRetentionSeconds' THEN
        v_cret := coalesce((p_options ->> 'completedRetentionSeconds')::integer, 0);
    ELSIF p_reset THEN
        v_cret := 0;
    END IF;
    UPDATE queen.queues SET retention_seconds = v_ret, completed_retention_seconds = v_cret WHERE id = v_id;
    retention_seconds := v_ret;
    completed_retention_seconds := v_cret;
    RETURN NEXT;
END
$$;
