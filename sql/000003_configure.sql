-- 000003: queue configuration (version 1).
--
-- /configure semantics (docs/configure.md):
--   * a key present with a value sets it;
--   * a key present with JSON null restores that option's default;
--   * a key omitted keeps its current value, except on create (nothing to
--     keep) and with p_replace (a manifest means the whole configuration),
--     where it takes the default.
-- Concurrent configures of one queue serialise on the queue row lock.
-- Option names and types are validated by the broker before this is called.

CREATE FUNCTION queen.queue_option_defaults_v1()
RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT '{"dedupWindowSeconds": 3600}'::jsonb $$;

CREATE FUNCTION queen.queue_configure_v1(p_queue text, p_options jsonb, p_replace boolean)
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

CREATE FUNCTION queen.queue_get_v1(p_queue text)
RETURNS TABLE (options jsonb, created_at timestamptz, updated_at timestamptz, partitions bigint)
LANGUAGE sql STABLE
AS $$
    SELECT jsonb_build_object('dedupWindowSeconds', q.dedup_window_seconds), q.created_at, q.updated_at,
           (SELECT count(*) FROM queen.log_partitions lp WHERE lp.queue_id = q.id)
    FROM queen.queues q WHERE q.name = p_queue
$$;
