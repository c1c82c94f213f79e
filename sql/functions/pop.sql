-- The read family: the leased pop and the frame decoder. The argument is in
-- docs/read-path.md; how this file is applied, in docs/sql-layout.md.
--
-- The claims the pop keeps:
--   1. One live lease per (partition, group): the lease lives in the cursor
--      row, which is taken FOR UPDATE (SKIP LOCKED: a pop never waits for
--      another pop or an ack, it takes the next available partition), and is
--      chosen only when it has no lease or an expired one. The lease span
--      starts right after the committed offset, so two leases of one row can
--      never overlap, and a new lease on a row supersedes the expired one.
--   2. Nothing below log_start is read: a cursor below it skips to it and the
--      skip is reported. log_start is re-read after the cursor row is locked
--      (a statement's snapshot predates its lock; see the comment there).
--   3. Pop takes no queen.log_partitions lock: it reads the allocator without
--      one, so it never waits on a push. Every segment at or below the
--      last_offset it read is committed (the allocator and the segment commit
--      in one transaction) and a later statement sees them.
--   4. A pop that only takes a lease commits with synchronous_commit off
--      (transaction-local): a lease is a promise of redelivery, not data, and
--      any later synchronous commit (the ack) flushes past it. A pop that
--      fixes a start position, creates cursors, skips, or auto-acks commits
--      synchronously. So the broker calls the pop alone (src/engine/pop.ts).
--
-- Live: log_pop_v3 (src/engine/pop.ts) and log_read_v1 (src/engine/acks.ts,
-- and psql users). Earlier pops: sql/000011, sql/000024, sql/000028.

-- Decodes a partition's frames in [p_from, p_to] (format: docs/frame-format.md),
-- so psql users can read the log:
--   SELECT * FROM queen.log_read_v1(42, 0, 99);
-- Walks each segment's frames in SQL (versions 1 and 2; a v2 frame's Kafka origin
-- is skipped); the broker decodes in TypeScript instead.
CREATE OR REPLACE FUNCTION queen.log_read_v1(p_partition_id bigint, p_from bigint, p_to bigint)
RETURNS TABLE (msg_offset bigint, message_id uuid, transaction_id text, trace_context text, payload bytea, created_at timestamptz)
LANGUAGE plpgsql STABLE STRICT
AS $$
#variable_conflict use_column
DECLARE
    s   record;
    v   integer;
    n   integer;
    k   integer;
    pos integer;
    tl  integer;
    cl  integer;
    pl  integer;
BEGIN
    FOR s IN
        SELECT ls.base_offset, ls.end_offset, ls.created_at, ls.blob
        FROM queen.log_segments ls
        WHERE ls.partition_id = p_partition_id
          -- From the segment holding p_from (a bounded index range, however long the log).
          AND ls.base_offset >= coalesce((SELECT max(x.base_offset) FROM queen.log_segments x
                                          WHERE x.partition_id = p_partition_id AND x.base_offset <= p_from), p_from)
          AND ls.base_offset <= p_to
        ORDER BY ls.base_offset
    LOOP
        v := get_byte(s.blob, 0);
        IF v NOT IN (1, 2) THEN
            RAISE EXCEPTION 'log_read_v1: unknown segment format version %', v USING ERRCODE = '22000';
        END IF;
        n := (get_byte(s.blob, 1) << 24) | (get_byte(s.blob, 2) << 16) | (get_byte(s.blob, 3) << 8) | get_byte(s.blob, 4);
        pos := 5 + 16 * n; -- 0-based, get_byte's convention
        FOR k IN 0 .. n - 1 LOOP
            EXIT WHEN s.base_offset + k > p_to;
            tl := (get_byte(s.blob, pos) << 8) | get_byte(s.blob, pos + 1);
            cl := (get_byte(s.blob, pos + 2 + tl) << 8) | get_byte(s.blob, pos + 3 + tl);
            pl := (get_byte(s.blob, pos + 4 + tl + cl) << 24) | (get_byte(s.blob, pos + 5 + tl + cl) << 16)
                | (get_byte(s.blob, pos + 6 + tl + cl) << 8) | get_byte(s.blob, pos + 7 + tl + cl);
            IF s.base_offset + k >= p_from THEN
                msg_offset := s.base_offset + k;
                message_id := encode(substring(s.blob FROM 6 + 16 * k FOR 16), 'hex')::uuid;
                transaction_id := convert_from(substring(s.blob FROM pos + 3 FOR tl), 'UTF8');
                trace_context := CASE WHEN cl = 0 THEN NULL ELSE convert_from(substring(s.blob FROM pos + 5 + tl FOR cl), 'UTF8') END;
                payload := substring(s.blob FROM pos + 9 + tl + cl FOR pl);
                created_at := s.created_at;
                RETURN NEXT;
            END IF;
            pos := pos + 8 + tl + cl + pl;
            IF v = 2 THEN
                -- Version 2 frames end with a length-prefixed Kafka origin section; skipped here.
                pos := pos + 4 + ((get_byte(s.blob, pos) << 24) | (get_byte(s.blob, pos + 1) << 16)
                                  | (get_byte(s.blob, pos + 2) << 8) | get_byte(s.blob, pos + 3));
            END IF;
        END LOOP;
    END LOOP;
END
$$;

-- Pops at most p_batch messages of one partition of p_queue (p_partition
-- NULL: any partition of the queue, least recently served first) for
-- p_group. p_mode 'all' | 'new' | 'from' (with p_from) fixes where the group
-- starts, the first time the group pops this queue. p_lease_seconds NULL:
-- the queue's lease_seconds. p_auto_ack: commit the span at once (no lease).
--
-- Output: no row when nothing is available; a row with only lease_expires_at
-- when nothing is available until that instant (a live lease expires).
-- Otherwise one row per segment overlapping the delivered span [span_from,
-- span_to], lease metadata repeated on each; seg_blob is NULL for a segment
-- of more than p_inline_max frames (the broker reads those through its
-- segment cache instead of shipping a huge blob per small pop). A row with a
-- NULL seg_base reports a cursor that skipped to log_start and found nothing
-- left to deliver. settled: offsets in the span already settled out of order
-- (not delivered).
CREATE OR REPLACE FUNCTION queen.log_pop_v3(
    p_queue         text,
    p_partition     text,
    p_group         text,
    p_batch         integer,
    p_lease_seconds integer,
    p_mode          text,
    p_from          timestamptz,
    p_worker        text,
    p_auto_ack      boolean,
    p_inline_max    integer)
RETURNS TABLE (
    lease_id         uuid,
    lease_expires_at timestamptz,
    partition_id     bigint,
    partition_name   text,
    span_from        bigint,
    span_to          bigint,
    skipped          bigint,
    redelivered      boolean,
    settled          bigint[],
    seg_base         bigint,
    seg_end          bigint,
    seg_created      timestamptz,
    seg_blob         bytea)
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
    v_qid       bigint;
    v_lease     integer;
    v_sub       timestamptz;
    v_now       timestamptz := clock_timestamp();
    v_pid       bigint;
    v_name      text;
    v_committed bigint;
    v_settled   bigint[];
    v_had_lease boolean;
    v_last      bigint;
    v_start     bigint;
    v_end       bigint;
    v_skipped   bigint := 0;
    v_lease_id  uuid;
    v_expires   timestamptz;
    v_first     bigint;
    v_new_group boolean := false;
    v_new_curs  integer := 0;
BEGIN
    IF p_batch IS NULL OR p_batch < 1 THEN
        RAISE EXCEPTION 'log_pop_v3: batch must be at least 1' USING ERRCODE = '22023';
    END IF;
    IF p_mode NOT IN ('all', 'new', 'from') OR (p_mode = 'from' AND p_from IS NULL) THEN
        RAISE EXCEPTION 'log_pop_v3: bad subscription mode %', p_mode USING ERRCODE = '22023';
    END IF;

    SELECT q.id, q.lease_seconds INTO v_qid, v_lease FROM queen.queues q WHERE q.name = p_queue;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    v_lease := coalesce(p_lease_seconds, v_lease);

    -- The group's subscription start, fixed on its first pop of the queue.
    SELECT g.subscribed_from INTO v_sub FROM queen.log_groups g WHERE g.queue_id = v_qid AND g.consumer_group = p_group;
    IF NOT FOUND THEN
        INSERT INTO queen.log_groups (queue_id, consumer_group, subscribed_from)
        VALUES (v_qid, p_group, CASE p_mode WHEN 'new' THEN v_now WHEN 'from' THEN p_from END)
        ON CONFLICT DO NOTHING;
        v_new_group := true;
        SELECT g.subscribed_from INTO v_sub FROM queen.log_groups g WHERE g.queue_id = v_qid AND g.consumer_group = p_group;
    END IF;

    -- A cursor for every partition the group has not seen yet. Ascending id,
    -- so two pops provisioning together wait on each other's keys in one order.
    INSERT INTO queen.log_cursors (partition_id, consumer_group, committed_offset)
    SELECT lp.id, p_group,
           CASE WHEN v_sub IS NULL THEN lp.log_start - 1
                ELSE GREATEST(lp.log_start - 1, coalesce((
                    SELECT ls.end_offset FROM queen.log_segments ls
                    WHERE ls.partition_id = lp.id AND ls.created_at < v_sub
                    ORDER BY ls.base_offset DESC LIMIT 1), -1))
           END
    FROM queen.log_partitions lp
    WHERE lp.queue_id = v_qid
      AND (p_partition IS NULL OR lp.name = p_partition)
      AND NOT EXISTS (SELECT 1 FROM queen.log_cursors c WHERE c.partition_id = lp.id AND c.consumer_group = p_group)
    ORDER BY lp.id
    ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS v_new_curs = ROW_COUNT;

    -- Claim 1: the cursor row is the lease. Pending, and not under a live lease.
    SELECT c.partition_id, lp.name, c.committed_offset, c.settled, c.lease_end IS NOT NULL, lp.last_offset, lp.log_start
    INTO v_pid, v_name, v_committed, v_settled, v_had_lease, v_last, v_start
    FROM queen.log_cursors c
    JOIN queen.log_partitions lp ON lp.id = c.partition_id
    WHERE lp.queue_id = v_qid
      AND c.consumer_group = p_group
      AND (p_partition IS NULL OR lp.name = p_partition)
      AND lp.last_offset > c.committed_offset
      AND (c.lease_end IS NULL OR c.lease_expires_at <= v_now)
    ORDER BY c.last_leased_at NULLS FIRST, c.partition_id
    LIMIT 1
    FOR UPDATE OF c SKIP LOCKED;
    IF NOT FOUND THEN
        -- Nothing available. When pending messages sit under live leases, say
        -- when the first of those expires: a long poll wakes then instead of
        -- polling.
        SELECT min(c.lease_expires_at) INTO v_expires
        FROM queen.log_cursors c
        JOIN queen.log_partitions lp ON lp.id = c.partition_id
        WHERE lp.queue_id = v_qid
          AND c.consumer_group = p_group
          AND (p_partition IS NULL OR lp.name = p_partition)
          AND lp.last_offset > c.committed_offset
          AND c.lease_end IS NOT NULL;
        IF v_expires IS NOT NULL THEN
            lease_expires_at := v_expires;
            RETURN NEXT;
        END IF;
        RETURN;
    END IF;

    -- Claim 2 needs the log_start of NOW, not of the statement above: that
    -- statement's snapshot was taken before it locked the cursor row, so a
    -- retention step that committed in between (it held this row FOR SHARE,
    -- and released it at commit) raised log_start and removed segments this
    -- snapshot still shows. Version 1 used that stale value, leased a span
    -- whose head was gone and delivered the rest: the removed offsets were
    -- neither delivered nor reported skipped. This statement takes a new
    -- snapshot while the row lock is held, and no step can commit on this
    -- partition until this pop's transaction ends (it needs the row FOR
    -- SHARE), so what it reads stays true for the rest of the pop.
    SELECT lp.log_start, lp.last_offset INTO v_start, v_last
    FROM queen.log_partitions lp WHERE lp.id = v_pid;

    -- Claim 2: never below log_start (v_start holds log_start here).
    IF v_committed + 1 < v_start THEN
        v_skipped := v_start - v_committed - 1;
        v_committed := v_start - 1;
        v_settled := ARRAY(SELECT x FROM unnest(v_settled) AS x WHERE x > v_committed ORDER BY x);
    END IF;
    v_start := v_committed + 1;
    IF v_start > v_last THEN
        UPDATE queen.log_cursors c
        SET committed_offset = v_committed, settled = v_settled, lease_end = NULL, lease_id = NULL,
            lease_expires_at = NULL, worker_id = NULL, released = '{}'
        WHERE c.partition_id = v_pid AND c.consumer_group = p_group;
        partition_id := v_pid;
        partition_name := v_name;
        skipped := v_skipped;
        RETURN NEXT;
        RETURN;
    END IF;
    v_end := LEAST(v_start + p_batch - 1, v_last);

    IF p_auto_ack THEN
        UPDATE queen.log_cursors c
        SET committed_offset = v_end,
            settled = ARRAY(SELECT x FROM unnest(v_settled) AS x WHERE x > v_end ORDER BY x),
            lease_end = NULL, lease_id = NULL, lease_expires_at = NULL, worker_id = NULL, released = '{}',
            retry_offsets = '{}', retry_counts = '{}',
            deliveries = c.deliveries + 1, last_leased_at = v_now
        WHERE c.partition_id = v_pid AND c.consumer_group = p_group;
    ELSE
        v_lease_id := gen_random_uuid();
        v_expires := v_now + make_interval(secs => v_lease);
        UPDATE queen.log_cursors c
        SET committed_offset = v_committed, settled = v_settled,
            lease_end = v_end, lease_id = v_lease_id, lease_expires_at = v_expires, worker_id = p_worker,
            released = '{}', deliveries = c.deliveries + 1, last_leased_at = v_now
        WHERE c.partition_id = v_pid AND c.consumer_group = p_group;
        -- Lease only (see the header): nothing but the lease changed, so
        -- this commit need not wait for its WAL flush.
        IF NOT v_new_group AND v_new_curs = 0 AND v_skipped = 0 THEN
            PERFORM set_config('synchronous_commit', 'off', true);
        END IF;
    END IF;

    -- The segments of the span: from the one holding v_start (a bounded index
    -- range on the primary key, however long the log has grown).
    SELECT max(ls.base_offset) INTO v_first
    FROM queen.log_segments ls WHERE ls.partition_id = v_pid AND ls.base_offset <= v_start;

    RETURN QUERY
    SELECT v_lease_id, v_expires, v_pid, v_name, v_start, v_end, v_skipped, v_had_lease,
           ARRAY(SELECT x FROM unnest(v_settled) AS x WHERE x <= v_end ORDER BY x),
           ls.base_offset, ls.end_offset, ls.created_at,
           CASE WHEN ls.end_offset - ls.base_offset < p_inline_max THEN ls.blob END
    FROM queen.log_segments ls
    WHERE ls.partition_id = v_pid
      AND ls.base_offset >= coalesce(v_first, v_start)
      AND ls.base_offset <= v_end
    ORDER BY ls.base_offset;
END
$$;
