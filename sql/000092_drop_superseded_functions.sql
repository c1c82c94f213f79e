-- 000092: drops the function versions no broker calls any more
-- (docs/sql-layout.md, "Which versions exist").
--
-- Brokers of the release before the function files call log_push_v11,
-- log_pop_v3 and retention_step_v3, and log_push_v1 for a timer fire; the
-- brokers of this release call the same except log_push_v1. So during a
-- rolling upgrade nothing below is called by either, and log_push_v1 stays
-- (sql/functions/push.sql keeps it as the rolling-upgrade predecessor until
-- a later migration drops it). The helpers the dropped versions alone
-- called go too (log_verify_runs_v1: log_push_v2's; queue_retention_get_v1
-- and retention_candidates_v1: retention version 1's).
DROP FUNCTION queen.log_push_v2(bigint[], bigint[], integer[], integer[], integer[], bytea, integer[], bytea, integer[], integer[], bigint[], integer[]);
DROP FUNCTION queen.log_push_v3(bigint[], bigint[], integer[], integer[], integer[], bytea, integer[], bytea, integer[], integer[], bigint[], integer[]);
DROP FUNCTION queen.log_push_v4(bigint[], bigint[], integer[], integer[], integer[], bytea, integer[], bytea, integer[], integer[], bigint[], integer[]);
DROP FUNCTION queen.log_push_v5(bigint[], bigint[], integer[], integer[], integer[], bytea, integer[], bytea, integer[], integer[], bigint[], integer[]);
DROP FUNCTION queen.log_push_v6(bigint[], bigint[], integer[], integer[], integer[], bytea, integer[], bytea, integer[], integer[], bigint[], integer[]);
DROP FUNCTION queen.log_push_v7(bigint[], bigint[], integer[], integer[], integer[], bytea, integer[], bytea, integer[], integer[], bigint[], integer[]);
DROP FUNCTION queen.log_push_v8(bigint[], bigint[], integer[], integer[], integer[], bytea, integer[], bytea, integer[], integer[], bigint[], integer[]);
DROP FUNCTION queen.log_push_v9(bigint[], bigint[], integer[], integer[], integer[], bytea, integer[], bytea, integer[], integer[], bigint[], integer[]);
DROP FUNCTION queen.log_push_v10(bigint[], bigint[], integer[], integer[], integer[], bytea, integer[], bytea, integer[], integer[], bigint[], integer[]);
DROP FUNCTION queen.log_verify_runs_v1(bigint, timestamptz, bigint, bytea, integer[], bigint[], integer[]);
DROP FUNCTION queen.log_pop_v1(text, text, text, integer, integer, text, timestamptz, text, boolean, integer);
DROP FUNCTION queen.log_pop_v2(text, text, text, integer, integer, text, timestamptz, text, boolean, integer);
DROP FUNCTION queen.retention_step_v1(bigint, integer);
DROP FUNCTION queen.retention_step_v2(bigint, integer, bigint);
DROP FUNCTION queen.retention_candidates_v1(bigint, integer);
DROP FUNCTION queen.queue_retention_get_v1(text);
