-- 000029: no VACUUM truncation of the log tables' TOAST tables either.
--
-- Migration 000020 set vacuum_truncate = off on log_segments and log_txns so
-- that VACUUM never takes an ACCESS EXCLUSIVE lock to give empty trailing
-- pages back: that lock would stall every push behind it. The option applies
-- to the table itself, not to its TOAST table, which has its own
-- (toast.vacuum_truncate). The segment blobs live in log_segments' TOAST
-- table, and front-deletes empty its tail as readily as the table's. The
-- 30-minute retention soak of 2026-12-01 saw autovacuum shrink log_segments
-- by 667 MB in one step (bench/results/2026-12-01-soak-retention-conc8-walmax1g.json,
-- minute 25.8), i.e. it truncated the TOAST table under ACCESS EXCLUSIVE,
-- which blocks every insert of a blob and every read of one until it ends.
-- Storage parameters take SHARE UPDATE EXCLUSIVE, never ACCESS EXCLUSIVE.
ALTER TABLE queen.log_segments SET (toast.vacuum_truncate = off);
ALTER TABLE queen.log_txns SET (toast.vacuum_truncate = off);
