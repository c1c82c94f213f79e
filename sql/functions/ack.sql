-- The ack family: the write of an optimistic ack (src/engine/acks.ts; the
-- locked ack is plain statements there). Argument: docs/read-path.md; how
-- this file is applied: docs/sql-layout.md.

-- Why: an ack under the cursor lock is four round trips (BEGIN, SELECT ...
-- FOR UPDATE, UPDATE, COMMIT). On a broker whose event loop also decodes
-- pops, each round trip waits its turn behind whole batches of other work:
-- a drain of 4 consumers measured ~5-7 ms of wall time per round trip while
-- PostgreSQL spent ~0.1 ms on each, and the ack took 70 % of each consumer's
-- time. The optimistic ack reads the cursors without a lock, decides in the
-- broker exactly as the locked ack does, and then writes with this one call
-- (autocommit: the call is its own transaction): two round trips.
--
-- What it keeps: the decision is only applied to the state it was made on.
-- Under the row locks (ascending (partition_id, consumer_group), the cursor
-- level of the global lock order, as the locked ack takes them), every
-- cursor the decision read is compared with what it read: the columns the
-- decision depends on (committed_offset, settled, lease_end, lease_id,
-- released, retry_offsets, retry_counts) and the queue's retry_limit. If all
-- are unchanged, the decision is the one the locked ack would have made at
-- this point, and the updates are written (the same UPDATE as the locked
-- ack's); if any differs, or a cursor is gone, nothing is written and the
-- caller acks again under the lock. So the optimistic ack is linearised at
-- this call, and a concurrent pop, ack or lease change can only cost a retry.
--
-- p_expected: one object per cursor read (changed or not), with the columns
-- above as read (retry_limit NULL when the decision did not use it).
-- p_updates: one object per changed cursor, the new values.
--
-- The expected state need not come from a read: a broker that took the lease
-- (or last acked it) may decide on the state it knows and save the read.
-- Nothing is trusted by that: a wrong guess differs from the row, the call
-- answers false and writes nothing, and the ack reads the row.
CREATE OR REPLACE FUNCTION queen.log_ack_cas_v1(p_expected jsonb, p_updates jsonb)
RETURNS boolean
LANGUAGE plpgsql
AS $$
DECLARE
    v_want integer := jsonb_array_length(p_expected);
    v_same integer;
BEGIN
    -- Lock first (ascending), compare after: in READ COMMITTED this second
    -- statement reads the latest committed rows, which nobody can change
    -- while the locks are held.
    PERFORM 1
    FROM queen.log_cursors c
    WHERE (c.partition_id, c.consumer_group) IN (
        SELECT e.partition_id, e.consumer_group
        FROM jsonb_to_recordset(p_expected) AS e (partition_id bigint, consumer_group text))
    ORDER BY c.partition_id, c.consumer_group
    FOR UPDATE;

    SELECT count(*) INTO v_same
    FROM jsonb_to_recordset(p_expected) AS e (partition_id bigint, consumer_group text, committed_offset bigint,
         settled bigint[], lease_end bigint, lease_id uuid, released bigint[], retry_offsets bigint[],
         retry_counts integer[], retry_limit integer)
    JOIN queen.log_cursors c ON c.partition_id = e.partition_id AND c.consumer_group = e.consumer_group
    JOIN queen.log_partitions lp ON lp.id = c.partition_id
    JOIN queen.queues q ON q.id = lp.queue_id
    WHERE c.committed_offset = e.committed_offset
      AND c.settled = e.settled
      AND c.lease_end IS NOT DISTINCT FROM e.lease_end
      AND c.lease_id IS NOT DISTINCT FROM e.lease_id
      AND c.released = e.released
      AND c.retry_offsets = e.retry_offsets
      AND c.retry_counts = e.retry_counts
      -- NULL: the decision read no retry_limit (no failed ack in it).
      AND (e.retry_limit IS NULL OR q.retry_limit = e.retry_limit);
    IF v_same <> v_want THEN
        RETURN false;
    END IF;

    UPDATE queen.log_cursors c
    SET committed_offset = u.committed_offset, settled = u.settled, released = u.released,
        retry_offsets = u.retry_offsets, retry_counts = u.retry_counts,
        lease_end = u.lease_end,
        lease_id = CASE WHEN u.lease_end IS NULL THEN NULL ELSE c.lease_id END,
        lease_expires_at = CASE WHEN u.lease_end IS NULL THEN NULL ELSE c.lease_expires_at END,
        worker_id = CASE WHEN u.lease_end IS NULL THEN NULL ELSE c.worker_id END
    FROM jsonb_to_recordset(p_updates) AS u (partition_id bigint, consumer_group text, committed_offset bigint, settled bigint[],
         released bigint[], retry_offsets bigint[], retry_counts integer[], lease_end bigint)
    WHERE c.partition_id = u.partition_id AND c.consumer_group = u.consumer_group;
    RETURN true;
END
$$;
