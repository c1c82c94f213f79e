-- 000091: functions live in sql/functions/<family>.sql (docs/sql-layout.md).
--
-- Numbered migrations keep tables and data changes; functions are applied
-- from their family files at every start, after the numbered migrations and
-- under the same advisory lock, whenever a file's checksum differs from the
-- one recorded here (like Flyway's repeatable migrations). A file is
-- idempotent (CREATE OR REPLACE FUNCTION), so applying it again is harmless;
-- the record only saves the work.
CREATE TABLE queen.function_files (
    name       text PRIMARY KEY,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
