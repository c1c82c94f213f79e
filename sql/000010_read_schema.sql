-- 000010: the read side of the log: consumer groups, cursors and leases,
-- dead letters. Why it is shaped this way: docs/read-path.md.
--
-- Lock order (global): queen.log_partitions rows in ascending id first (push,
-- retention, and a /transaction that pushes), then queen.log_cursors rows in
-- ascending (partition_id, consumer_group). Pop and ack take only cursor
-- rows, so they never wait on a push; a /transaction takes the partition rows
-- it pushes to before any cursor row.

-- The first retained offset of a partition. Retention raises it; pop never
-- reads below it (a cursor that points below skips to it and says so). Not
-- indexed, so the allocator UPDATE stays a HOT update.
ALTER TABLE queen.log_partitions ADD COLUMN IF NOT EXISTS log_start bigint NOT NULL DEFAULT 0;

-- Per-queue consumer options (defaults as in Queen).
ALTER TABLE queen.queues
    ADD COLUMN lease_seconds integer NOT NULL DEFAULT 300 CHECK (lease_seconds > 0),
    ADD COLUMN retry_limit   integer NOT NULL DEFAULT 3 CHECK (retry_limit >= 0);

-- One row per (queue, consumer group): where the group's subscription starts.
-- subscribed_from NULL means "all retained history"; otherwise a partition
-- the group sees for the first time starts after its last segment created
-- before that instant (subscriptionMode new = from the group's first pop).
CREATE TABLE queen.log_groups (
    queue_id        bigint      NOT NULL REFERENCES queen.queues (id),
    consumer_group  text        NOT NULL,
    subscribed_from timestamptz,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (queue_id, consumer_group)
);

-- One row per (partition, consumer group).
--
-- committed_offset: every offset at or below it is settled (-1: none).
-- settled: offsets above committed_offset settled out of order (acked in a
--   lease whose earlier messages are still open); the cursor advances over
--   the contiguous prefix.
-- The lease: (committed_offset, lease_end] with lease_id, lease_expires_at,
--   worker_id; lease_end NULL = no lease. One live lease per row by
--   construction; an expired one makes its span available again.
-- released: offsets of the live lease answered failed/retry (not settled);
--   when every offset of the lease is settled or released, the lease ends.
-- retry_offsets/retry_counts: failed-ack counts of open offsets (retryLimit).
-- last_leased_at orders pops across a queue's partitions (least recently
--   served first).
CREATE TABLE queen.log_cursors (
    partition_id     bigint      NOT NULL,
    consumer_group   text        NOT NULL,
    committed_offset bigint      NOT NULL DEFAULT -1,
    settled          bigint[]    NOT NULL DEFAULT '{}',
    lease_end        bigint,
    lease_id         uuid,
    lease_expires_at timestamptz,
    worker_id        text,
    released         bigint[]    NOT NULL DEFAULT '{}',
    retry_offsets    bigint[]    NOT NULL DEFAULT '{}',
    retry_counts     integer[]   NOT NULL DEFAULT '{}',
    deliveries       bigint      NOT NULL DEFAULT 0,
    last_leased_at   timestamptz,
    created_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (partition_id, consumer_group)
);
-- Ack by lease and lease extension find their cursor by lease id.
CREATE UNIQUE INDEX log_cursors_lease_id ON queen.log_cursors (lease_id) WHERE lease_id IS NOT NULL;

-- Messages a consumer group gave up on (status dlq, or failed past the
-- queue's retryLimit). A copy of the frame is kept, so a dead letter outlives
-- the log's retention. Kafka-ingress dead letters stay on the Kafka DLQ topic.
CREATE TABLE queen.log_dead_letters (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    partition_id   bigint      NOT NULL,
    consumer_group text        NOT NULL,
    msg_offset     bigint      NOT NULL,
    message_id     uuid,
    transaction_id text,
    trace_context  text,
    payload        bytea,
    error          text,
    attempts       integer     NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    requeued_at    timestamptz
);
CREATE INDEX log_dead_letters_partition ON queen.log_dead_letters (partition_id, consumer_group, id);

-- Decodes a partition's frames in [p_from, p_to] (format: docs/frame-format.md),
-- so psql users can read the log:
--   SELECT * FROM queen.log_read_v1(42, 0, 99);
-- Walks each segment's frames in SQL; the broker decodes in TypeScript instead.
CREATE FUNCTION queen.log_read_v1(p_partition_id bigint, p_from bigint, p_to bigint)
RETURNS TABLE (msg_offset bigint, message_id uuid, transaction_id text, trace_context text, payload bytea, created_at timestamptz)
LANGUAGE plpgsql STABLE STRICT
AS $$
#variable_conflict use_column
DECLARE
    s   record;
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
        IF get_byte(s.blob, 0) <> 1 THEN
            RAISE EXCEPTION 'log_read_v1: unknown segment format version %', get_byte(s.blob, 0) USING ERRCODE = '22000';
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
        END LOOP;
    END LOOP;
END
$$;
