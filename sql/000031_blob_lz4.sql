-- 000031: segment blobs are compressed with lz4 where the server has it.
--
-- Measured (docs/deduplication.md, "Compressing blobs with lz4"): with the
-- default pglz, a segment of 200 ~290-byte JSON frames took ~60 ms of the
-- push's PostgreSQL time per 6 400 messages (pglz compressing 2 MB at
-- ~35 MB/s and saving ~3 %); with lz4 ~15 ms, and the blobs are a third
-- smaller. Existing values keep their compression until rewritten; both
-- decompress transparently. A server built without lz4 keeps pglz: the
-- statement is skipped, not failed, so the migration runs everywhere.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_settings
               WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals)) THEN
        ALTER TABLE queen.log_segments ALTER COLUMN blob SET COMPRESSION lz4;
    END IF;
END
$$;
