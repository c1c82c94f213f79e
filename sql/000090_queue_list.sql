-- Listing queues (GET /api/v1/resources/queues, `queenctl get queues`).
-- One row per queue, by name, with the same columns queue_get_v1 returns for
-- a single queue (it is called per row, so the two can never disagree).
-- Keyset pagination: names after p_after (NULL = from the start), at most p_limit rows.
CREATE FUNCTION queen.queue_list_v1(p_after text, p_limit integer)
RETURNS TABLE (name text, options jsonb, created_at timestamptz, updated_at timestamptz, partitions bigint)
LANGUAGE sql STABLE
AS $$
    SELECT q.name, g.options, g.created_at, g.updated_at, g.partitions
    FROM (SELECT queues.name FROM queen.queues
          WHERE p_after IS NULL OR queues.name > p_after
          ORDER BY queues.name
          LIMIT p_limit) q
    CROSS JOIN LATERAL queen.queue_get_v1(q.name) g
    ORDER BY q.name
$$;
