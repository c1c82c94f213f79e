-- The lag family: consumer lag per (queue, consumer group), for the
-- queen_consumer_lag_messages gauge (docs/observability.md). How this file
-- is applied: docs/sql-layout.md.

-- Lag of a group on a partition: retained offsets above its position, i.e.
-- last_offset - GREATEST(committed_offset, log_start - 1), never below 0.
-- Offsets settled out of order above committed_offset still count (they
-- are few, and the cursor has not passed them). A partition the group has
-- not popped yet has no cursor: with subscriptionMode all it lags by every
-- retained offset; with new/from its start is only fixed at its first pop,
-- so it counts from then on. Read only, no locks: a snapshot of the cursor
-- and partition rows, O(cursors + partitions) per call.
CREATE OR REPLACE FUNCTION queen.consumer_lag_v1()
RETURNS TABLE (queue_name text, consumer_group text, lag_messages bigint, partitions_behind bigint)
LANGUAGE sql STABLE
AS $$
    SELECT q.name, g.consumer_group,
           coalesce(sum(l.lag), 0)::bigint,
           count(*) FILTER (WHERE l.lag > 0)
    FROM queen.log_groups g
    JOIN queen.queues q ON q.id = g.queue_id
    JOIN queen.log_partitions lp ON lp.queue_id = g.queue_id
    LEFT JOIN queen.log_cursors c ON c.partition_id = lp.id AND c.consumer_group = g.consumer_group
    CROSS JOIN LATERAL (
        SELECT CASE
                 WHEN c.partition_id IS NOT NULL THEN GREATEST(lp.last_offset - GREATEST(c.committed_offset, lp.log_start - 1), 0)
                 WHEN g.subscribed_from IS NULL THEN GREATEST(lp.last_offset - (lp.log_start - 1), 0)
                 ELSE 0
               END AS lag
    ) l
    GROUP BY q.name, g.consumer_group
$$;
