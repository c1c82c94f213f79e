-- Retention turns log_segments and log_txns into queue-like tables: rows are
-- inserted at the tail and deleted from the front all day. Their size stays
-- flat only if VACUUM makes the deleted space reusable about as fast as
-- retention creates it. PostgreSQL's defaults (vacuum once 20 % of the table
-- is dead, throttled by the cost delay) let a 30-minute soak at 35k msg/s
-- grow log_segments 3x in steps, one per autovacuum cycle
-- (bench/results/2026-12-01-soak-retention.json). So, for these two tables
-- and their TOAST tables (where the segment blobs live): vacuum after a fixed
-- number of dead rows instead of a fraction, unthrottled. These are storage
-- parameters (SHARE UPDATE EXCLUSIVE), never an ACCESS EXCLUSIVE lock.
ALTER TABLE queen.log_segments SET (
  autovacuum_vacuum_scale_factor = 0,
  autovacuum_vacuum_threshold = 5000,
  autovacuum_vacuum_cost_delay = 0,
  toast.autovacuum_vacuum_scale_factor = 0,
  toast.autovacuum_vacuum_threshold = 20000,
  toast.autovacuum_vacuum_cost_delay = 0
);
ALTER TABLE queen.log_txns SET (
  autovacuum_vacuum_scale_factor = 0,
  autovacuum_vacuum_threshold = 5000,
  autovacuum_vacuum_cost_delay = 0,
  toast.autovacuum_vacuum_scale_factor = 0,
  toast.autovacuum_vacuum_threshold = 20000,
  toast.autovacuum_vacuum_cost_delay = 0
);
