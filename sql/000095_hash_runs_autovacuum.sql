-- 000095: vacuum the cold path's runs about as fast as compaction rewrites them.
--
-- A merge writes the union of `fanout` runs and deletes the merged runs'
-- slices in one transaction (sql/functions/compaction.sql), so once most of a
-- window is past the broker's budget each hash's slice is deleted again at
-- every level it climbs: log_hash_slices churns as the retention tables do
-- (000023). Under PostgreSQL's defaults (vacuum once 20 % of the table is
-- dead, throttled by the cost delay) a 30-minute retention soak at the
-- service's defaults ended with 5.5 M live and 4.9 M dead slices in 8.6 GB,
-- and the lookups' slice probes read a table twice its live size. So, as for
-- log_segments and log_txns: vacuum after a fixed number of dead rows,
-- unthrottled. The threshold is larger than theirs because every vacuum of
-- this table also scans its whole primary-key index, the one the probes
-- descend. Storage parameters take SHARE UPDATE EXCLUSIVE, never an ACCESS
-- EXCLUSIVE lock.
ALTER TABLE queen.log_hash_slices SET (
  autovacuum_vacuum_scale_factor = 0,
  autovacuum_vacuum_threshold = 50000,
  autovacuum_vacuum_cost_delay = 0
);
ALTER TABLE queen.log_hash_runs SET (
  autovacuum_vacuum_scale_factor = 0,
  autovacuum_vacuum_threshold = 1000,
  autovacuum_vacuum_cost_delay = 0
);
