-- The configure family: queue options through /configure and the queue
-- listing (docs/configure.md, docs/read-path.md for the read options). How
-- this file is applied: docs/sql-layout.md. Retention's options are in
-- retention.sql.
--
-- /configure semantics:
--   * a key present with a value sets it;
--   * a key present with JSON null restores that option's default;
--   * a key omitted keeps its current value, except on create (nothing to
--     keep) and with p_replace / p_reset (a manifest means the whole
--     configuration), where it takes the default.
-- Concurrent configures of one queue serialise on the queue row lock.
-- Option names, types and ranges are validated by the broker before these
-- are called; the columns' CHECKs are the last guard.
--
-- Order matters here: SQL-language functions are checked against what
-- exists when they are created, so queue_get_v1 precedes queue_list_v1.

CREATE OR REPLACE FUNCTION queen.queue_option_defaults_v1()
RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT '{"dedupWindowSeconds": 3600}'::jsonb $$;

CREATE OR REPLACE FUNCTION queen.queue_configure_v1(p_queue text, p_options jsonb, p_replace boolean)
RETURNS TABLE (created boolean, options jsonb)
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
    v_created  boolean;
    v_id       bigint;
    v_defaults jsonb := queen.queue_option_defaults_v1();
    v_window   integer;
BEGIN
    INSERT INTO queen.queues (name) VALUES (p_queue)
    ON CONFLICT (name) DO NOTHING
    RETURNING true INTO v_created;
    v_created := coalesce(v_created, false);

    SELECT q.id, q.dedup_window_seconds INTO v_id, v_window
    FROM queen.queues q WHERE q.name = p_queue
    FOR UPDATE;

    IF p_options ? 'dedupWindowSeconds' THEN
        v_window := coalesce((p_options ->> 'dedupWindowSeconds')::integer, (v_defaults ->> 'dedupWindowSeconds')::integer);
    ELSIF v_created OR p_replace THEN
        v_window := (v_defaults ->> 'dedupWindowSeconds')::integer;
    END IF;

    UPDATE queen.queues
    SET dedup_window_seconds = v_window, updated_at = clock_timestamp()
    WHERE id = v_id;

    created := v_created;
    options := jsonb_build_object('dedupWindowSeconds', v_window);
    RETURN NEXT;
END
$$;

CREATE OR REPLACE FUNCTION queen.queue_get_v1(p_queue text)
RETURNS TABLE (options jsonb, created_at timestamptz, updated_at timestamptz, partitions bigint)
LANGUAGE sql STABLE
AS $$
    SELECT jsonb_build_object('dedupWindowSeconds', q.dedup_window_seconds), q.created_at, q.updated_at,
           (SELECT count(*) FROM queen.log_partitions lp WHERE lp.queue_id = q.id)
    FROM queen.queues q WHERE q.name = p_queue
$$;

-- Listing queues (GET /api/v1/resources/queues, `queenctl get queues`).
-- One row per queue, by name, with the same columns queue_get_v1 returns for
-- a single queue (it is called per row, so the two can never disagree).
-- Keyset pagination: names after p_after (NULL = from the start), at most p_limit rows.
CREATE OR REPLACE FUNCTION queen.queue_list_v1(p_after text, p_limit integer)
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

-- Sets the read options of an existing queue (leaseTime -> lease_seconds,
-- retryLimit -> retry_limit), under the /configure rules above.
CREATE OR REPLACE FUNCTION queen.queue_read_configure_v1(p_queue text, p_options jsonb, p_reset boolean)
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
CREATE OR REPLACE FUNCTION queen.queue_read_get_v1(p_queue text)
RETURNS TABLE (lease_seconds integer, retry_limit integer)
LANGUAGE sql STABLE
AS $$
    SELECT q.lease_seconds, q.retry_limit FROM queen.queues q WHERE q.name = p_queue
$$;
