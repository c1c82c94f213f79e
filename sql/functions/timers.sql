-- The timers family (docs/timers.md). How this file is applied:
-- docs/sql-layout.md.
--
-- A timer is a staging row that becomes one message. Its message id and
-- transactionId are fixed when it is scheduled; the fire deletes the row and
-- appends the frame in ONE transaction (the broker's TimerSweeper: claim,
-- lock partitions, log_push_v11 with each partition's own watermark), so if
-- that transaction commits the row is gone and the message is in the log,
-- and if it rolls back, neither happened.
--
-- The claim is the row lock: a sweeper takes due rows with FOR UPDATE SKIP
-- LOCKED, so two sweepers (or two brokers) never fire the same row, and a
-- sweeper that dies releases its claim with its connection.

-- Schedules (inserts) or reschedules (updates) a timer. A reschedule keeps
-- the message id promised when the timer was first scheduled; it keeps the
-- transactionId too unless a new one is given. status: 'scheduled' for a new
-- row, 'rescheduled' for an update.
--
-- A reschedule that arrives while a fire holds the row waits for it; if the
-- fire committed, the row is gone and this schedules a new timer (a second
-- message: docs/timers.md states that consequence).
CREATE OR REPLACE FUNCTION queen.timer_schedule_v1(
    p_queue_id      bigint,
    p_key           text,
    p_partition_id  bigint,
    p_deliver_at    timestamptz,
    p_txn           text,
    p_default_txn   text,
    p_message_id    uuid,
    p_payload       bytea,
    p_trace         text)
RETURNS TABLE (status text, message_id uuid, transaction_id text)
LANGUAGE sql
AS $$
    INSERT INTO queen.timers AS t (queue_id, timer_key, partition_id, deliver_at, transaction_id, message_id, payload, trace_context)
    VALUES (p_queue_id, p_key, p_partition_id, p_deliver_at, coalesce(p_txn, p_default_txn), p_message_id, p_payload, p_trace)
    ON CONFLICT (queue_id, timer_key) DO UPDATE
    SET partition_id = EXCLUDED.partition_id,
        deliver_at = EXCLUDED.deliver_at,
        transaction_id = coalesce(p_txn, t.transaction_id),
        payload = EXCLUDED.payload,
        trace_context = EXCLUDED.trace_context,
        attempts = 0,
        last_error = NULL,
        updated_at = clock_timestamp()
    -- xmax is 0 on a freshly inserted row version and the locker's xid on an
    -- updated one: how one statement tells insert from update.
    RETURNING CASE WHEN t.xmax = 0 THEN 'scheduled' ELSE 'rescheduled' END, t.message_id, t.transaction_id
$$;

-- Cancels a pending timer. Returns true when a row was removed. A fire that
-- holds the row makes this wait; once the fire commits the row is gone and
-- this answers false: "no longer pending", which includes "delivered".
CREATE OR REPLACE FUNCTION queen.timer_cancel_v1(p_queue text, p_key text)
RETURNS boolean
LANGUAGE sql
AS $$
    WITH d AS (
        DELETE FROM queen.timers t
        USING queen.queues q
        WHERE q.name = p_queue AND t.queue_id = q.id AND t.timer_key = p_key
        RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM d)
$$;

-- Claims up to p_limit due timers and deletes their rows in the caller's
-- transaction (the fire transaction). FOR UPDATE SKIP LOCKED: rows another
-- sweeper holds are skipped, not waited for. The rows come back ordered by
-- partition id so the caller can lock partitions in ascending order.
--
-- Two shapes keep a claim's cost at its own batch whatever the table holds
-- and whatever its statistics say:
-- * the due bound is statement_timestamp() (stable), so it is the index
--   scan's upper bound on timers_due: timers due later are never visited
--   (a volatile clock_timestamp() could only filter, reading every pending
--   timer's index entry whenever fewer than p_limit were due);
-- * the delete finds its rows by the claimed tuple ids (a TID scan), not by
--   a join back on the key: planned from statistics taken while the table
--   was empty (as after a quiet spell), that join read the whole table once
--   per claimed row.
-- Only rows the DELETE removed are returned, so a row whose tuple moved
-- between claim and delete is simply not fired by this sweep.
CREATE OR REPLACE FUNCTION queen.timer_claim_v1(p_limit integer)
RETURNS TABLE (partition_id bigint, transaction_id text, message_id uuid, payload bytea, trace_context text)
LANGUAGE sql
AS $$
    WITH due AS (
        SELECT t.ctid AS tid
        FROM queen.timers t
        WHERE t.deliver_at <= statement_timestamp()
        ORDER BY t.deliver_at
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    ), d AS (
        DELETE FROM queen.timers t
        WHERE t.ctid = ANY (ARRAY(SELECT due.tid FROM due))
        RETURNING t.partition_id, t.transaction_id, t.message_id, t.payload, t.trace_context, t.deliver_at
    )
    SELECT d.partition_id, d.transaction_id, d.message_id, d.payload, d.trace_context
    FROM d
    ORDER BY d.partition_id, d.deliver_at, d.message_id
$$;

-- Locks the fire's partition rows in ascending id (the global lock order) and
-- returns each one's allocator watermark and current window: the fire then
-- pushes with p_verified = that watermark, so the push skips the duplicate
-- probe (docs/timers.md argues why the fire must not probe).
CREATE OR REPLACE FUNCTION queen.timer_lock_partitions_v1(p_partition_ids bigint[])
RETURNS TABLE (partition_id bigint, last_offset bigint, window_seconds integer)
LANGUAGE sql
AS $$
    SELECT lp.id, lp.last_offset, q.dedup_window_seconds
    FROM queen.log_partitions lp
    JOIN queen.queues q ON q.id = lp.queue_id
    WHERE lp.id = ANY (p_partition_ids)
    ORDER BY lp.id
    FOR UPDATE OF lp
$$;

-- Records a fire that failed and rolled back (its own short transaction).
-- The rows were claimed because they were due, so the due bound (stable,
-- as in the claim) lets the deliver_at index find them among the due rows
-- only: message_id has no index, and without the bound every pending timer
-- was read for each failed fire. A row rescheduled to a later time since
-- the failed fire is a new schedule, and is not counted.
CREATE OR REPLACE FUNCTION queen.timer_record_failure_v1(p_message_ids uuid[], p_error text)
RETURNS void
LANGUAGE sql
AS $$
    UPDATE queen.timers SET attempts = attempts + 1, last_error = left(p_error, 1000)
    WHERE deliver_at <= statement_timestamp() AND message_id = ANY (p_message_ids)
$$;

-- A pending timer, or no row.
CREATE OR REPLACE FUNCTION queen.timer_peek_v1(p_queue text, p_key text)
RETURNS TABLE (partition text, deliver_at timestamptz, transaction_id text, message_id uuid, payload bytea, attempts integer, last_error text, created_at timestamptz, updated_at timestamptz)
LANGUAGE sql STABLE
AS $$
    SELECT lp.name, t.deliver_at, t.transaction_id, t.message_id, t.payload, t.attempts, t.last_error, t.created_at, t.updated_at
    FROM queen.timers t
    JOIN queen.queues q ON q.id = t.queue_id
    JOIN queen.log_partitions lp ON lp.id = t.partition_id
    WHERE q.name = p_queue AND t.timer_key = p_key
$$;

-- Pending timers of a queue in due order (queenctl timers), paged by key.
CREATE OR REPLACE FUNCTION queen.timer_list_v1(p_queue text, p_limit integer)
RETURNS TABLE (timer_key text, partition text, deliver_at timestamptz, transaction_id text, message_id uuid, attempts integer)
LANGUAGE sql STABLE
AS $$
    SELECT t.timer_key, lp.name, t.deliver_at, t.transaction_id, t.message_id, t.attempts
    FROM queen.timers t
    JOIN queen.queues q ON q.id = t.queue_id
    JOIN queen.log_partitions lp ON lp.id = t.partition_id
    WHERE q.name = p_queue
    ORDER BY t.deliver_at, t.timer_key
    LIMIT p_limit
$$;
