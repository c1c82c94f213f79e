-- 000020: retention (docs/retention.md).
--
-- Two independent removals, each a bounded step under the partition's row
-- lock (the one global lock order: one partition row per step, so ascending
-- id trivially):
--   * segments older than the queue's retention_seconds (0 = keep) are
--     removed from the front of the partition, whole segments only, and
--     log_start rises past them (readers and the duplicate id lookup never
--     dereference removed data: a duplicate of a removed original answers
--     the all-zero id, as before);
--   * log_txns rows older than GREATEST(window, completed retention, 900 s)
--     are purged from the front, and txns_start rises to the first kept
--     offset. The push probe's lower bound is txns_start - 1, so the probe
--     never looks below it; every purged row was already outside the window
--     the probe compares against.

ALTER TABLE queen.queues
    ADD COLUMN retention_seconds integer NOT NULL DEFAULT 0 CHECK (retention_seconds >= 0),
    ADD COLUMN completed_retention_seconds integer NOT NULL DEFAULT 0 CHECK (completed_retention_seconds >= 0);

-- The read path adds the same column in its own migration; whichever lands
-- first creates it, the other is a no-op (same definition).
ALTER TABLE queen.log_partitions ADD COLUMN IF NOT EXISTS log_start bigint NOT NULL DEFAULT 0;

-- Retention deletes from the front of these tables all day. A VACUUM that
-- finds empty pages at the end of a table truncates them under an ACCESS
-- EXCLUSIVE lock, which would stall every push behind it: keep the pages.
ALTER TABLE queen.log_segments SET (vacuum_truncate = off);
ALTER TABLE queen.log_txns SET (vacuum_truncate = off);

-- Per-queue totals of what retention removed (cluster-wide: only the leader
-- writes, so the row is never contended by pushes).
CREATE TABLE queen.retention_stats (
    queue_id          bigint      PRIMARY KEY REFERENCES queen.queues (id),
    segments_removed  bigint      NOT NULL DEFAULT 0,
    messages_removed  bigint      NOT NULL DEFAULT 0,
    bytes_removed     bigint      NOT NULL DEFAULT 0,
    txns_rows_removed bigint      NOT NULL DEFAULT 0,
    last_removal_at   timestamptz
);

-- The smallest txns horizon whatever the configuration: a purge never
-- removes log_txns rows younger than this.
CREATE FUNCTION queen.retention_txns_floor_seconds_v1()
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT 900 $$;

-- Partitions (id > p_after, ascending, at most p_limit) whose front holds
-- something past its limit: a segment older than retention_seconds or a
-- log_txns row older than the txns horizon. Reads only the first row of each
-- (index order, starting at log_start / txns_start so dead index entries of
-- earlier purges are not walked); locks nothing.
CREATE FUNCTION queen.retention_candidates_v1(p_after bigint, p_limit integer)
RETURNS TABLE (partition_id bigint, last_id bigint)
LANGUAGE sql STABLE
AS $$
    WITH page AS (
        SELECT lp.id, lp.log_start, lp.txns_start, q.retention_seconds,
               GREATEST(q.dedup_window_seconds, q.completed_retention_seconds, queen.retention_txns_floor_seconds_v1()) AS txns_seconds
        FROM queen.log_partitions lp
        JOIN queen.queues q ON q.id = lp.queue_id
        WHERE lp.id > p_after
        ORDER BY lp.id
        LIMIT p_limit
    )
    SELECT p.id, (SELECT max(id) FROM page)
    FROM page p
    WHERE (p.retention_seconds > 0 AND EXISTS (
              SELECT 1 FROM (
                  SELECT s.created_at FROM queen.log_segments s
                  WHERE s.partition_id = p.id AND s.base_offset >= p.log_start
                  ORDER BY s.base_offset LIMIT 1) f
              WHERE f.created_at < now() - make_interval(secs => p.retention_seconds)))
       OR EXISTS (
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

-- One bounded retention step on one partition: one transaction, one row
-- lock, at most p_max_rows segments and p_max_rows log_txns rows removed.
-- Only a prefix of the partition is ever removed (the front rows past their
-- limit, stopping at the first one that is not), so what is kept is always a
-- contiguous suffix starting at log_start / txns_start.
--
-- more = a batch was full: the caller should step this partition again.
CREATE FUNCTION queen.retention_step_v1(p_partition_id bigint, p_max_rows integer)
RETURNS TABLE (
    queue_name        text,
    segments_removed  integer,
    messages_removed  bigint,
    bytes_removed     bigint,
    txns_rows_removed integer,
    log_start         bigint,
    txns_start        bigint,
    more              boolean)
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
    v_queue     bigint;
    v_qname     text;
    v_start     bigint;
    v_tstart    bigint;
    v_ret       integer;
    v_txns_secs integer;
    v_now       timestamptz;
    v_cut       bigint;
    v_seen      integer;
    v_more      boolean := false;
BEGIN
    -- The partition row lock: the same serializer the push takes, so a push
    -- sees either all of this step or none of it.
    SELECT lp.queue_id, q.name, lp.log_start, lp.txns_start, q.retention_seconds,
           GREATEST(q.dedup_window_seconds, q.completed_retention_seconds, queen.retention_txns_floor_seconds_v1())
    INTO v_queue, v_qname, v_start, v_tstart, v_ret, v_txns_secs
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

    IF v_ret > 0 THEN
        SELECT max(h.end_offset) FILTER (WHERE h.prefix_old), count(*)
        INTO v_cut, v_seen
        FROM (
            SELECT s.end_offset,
                   bool_and(s.created_at < v_now - make_interval(secs => v_ret)) OVER (ORDER BY s.base_offset) AS prefix_old
            FROM (
                SELECT s.base_offset, s.end_offset, s.created_at
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
            v_more := segments_removed = p_max_rows;
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
        -- The first kept offset: rows are contiguous, so the next row (if
        -- any) starts right after the last purged one.
        v_tstart := v_cut + 1;
        v_more := v_more OR txns_rows_removed = p_max_rows;
    END IF;

    IF segments_removed > 0 OR txns_rows_removed > 0 THEN
        -- Unindexed columns only: a HOT update, like the allocator's.
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
    RETURN NEXT;
END
$$;

-- How far behind retention is on one queue: the seconds its oldest kept
-- log_txns row is past its horizon (0 when retention keeps up), and the age
-- of its oldest retained segment. One index lookup per partition and table.
CREATE FUNCTION queen.retention_lag_v1(p_queue_id bigint)
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

-- Every queue's lag (the leader's per-queue gauges, after each pass).
CREATE FUNCTION queen.retention_overview_v1()
RETURNS TABLE (queue_name text, purge_lag_seconds double precision, oldest_retained_age_seconds double precision)
LANGUAGE sql STABLE
AS $$
    SELECT q.name, l.purge_lag_seconds, l.oldest_retained_age_seconds
    FROM queen.queues q
    CROSS JOIN LATERAL queen.retention_lag_v1(q.id) l
    ORDER BY q.name
$$;

-- Retention options and state of one queue (GET /api/v1/resources/queues/:queue).
CREATE FUNCTION queen.queue_retention_get_v1(p_queue text)
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
           coalesce(rs.segments_removed, 0), coalesce(rs.messages_removed, 0), coalesce(rs.bytes_removed, 0),
           coalesce(rs.txns_rows_removed, 0), rs.last_removal_at,
           l.purge_lag_seconds, l.oldest_retained_age_seconds
    FROM queen.queues q
    LEFT JOIN queen.retention_stats rs ON rs.queue_id = q.id
    CROSS JOIN LATERAL queen.retention_lag_v1(q.id) l
    WHERE q.name = p_queue
$$;

-- Sets the retention options of an existing queue (the row queue_configure_v1
-- just created or locked, in the same transaction). Same rules as /configure:
-- a present key sets (JSON null: the default, 0); an omitted key keeps its
-- value unless p_reset (a create or mode "replace"), where it takes 0.
CREATE FUNCTION queen.queue_retention_configure_v1(p_queue text, p_options jsonb, p_reset boolean)
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
