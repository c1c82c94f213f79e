-- 000026: the read options of a queue through /configure (docs/read-path.md).
--
-- queues.lease_seconds and queues.retry_limit (sql/000010) were fixed at
-- their column defaults (300 s, 3): nothing could set them. These functions
-- give them the /configure rules the other options follow: a present key
-- sets (JSON null: the default), an omitted key keeps its value unless
-- p_reset (a create or mode "replace"), where it takes the default. The
-- broker validates ranges first; the columns' CHECKs are the last guard.
-- Wire names follow Queen: leaseTime (seconds) and retryLimit.

CREATE FUNCTION queen.queue_read_configure_v1(p_queue text, p_options jsonb, p_reset boolean)
RETURNS TABLE (lease_seconds integer, retry_limit integer)
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
    v_id    bigint;
    v_lease integer;
    v_retry integer;
BEGIN
    -- The row queue_configure_v1 created or locked in this transaction.
    SELECT q.id, q.lease_seconds, q.retry_limit INTO v_id, v_lease, v_retry
    FROM queen.queues q WHERE q.name = p_queue
    FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'queue_read_configure_v1: queue % does not exist', p_queue USING ERRCODE = 'P0002';
    END IF;
    IF p_options ? 'leaseTime' THEN
        v_lease := coalesce((p_options ->> 'leaseTime')::integer, 300);
    ELSIF p_reset THEN
        v_lease := 300;
    END IF;
    IF p_options ? 'retryLimit' THEN
        v_retry := coalesce((p_options ->> 'retryLimit')::integer, 3);
    ELSIF p_reset THEN
        v_retry := 3;
    END IF;
    UPDATE queen.queues SET lease_seconds = v_lease, retry_limit = v_retry WHERE id = v_id;
    lease_seconds := v_lease;
    retry_limit := v_retry;
    RETURN NEXT;
END
$$;

-- The read options of one queue (no row: no such queue).
CREATE FUNCTION queen.queue_read_get_v1(p_queue text)
RETURNS TABLE (lease_seconds integer, retry_limit integer)
LANGUAGE sql STABLE
AS $$
    SELECT q.lease_seconds, q.retry_limit FROM queen.queues q WHERE q.name = p_queue
$$;
