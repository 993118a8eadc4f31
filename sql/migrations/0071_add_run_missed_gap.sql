-- 0071: missed fires are recorded in bounded form: one `missed` run row per gap (a saturation
-- pass that found fires the catch-up policy dropped) instead of one row per fire. fire_at is
-- the first missed fire of the gap, missed_last_at the last one, missed_fires how many.
-- Rows written before this migration (one per fire) read as a gap of one.
ALTER TABLE cronbox.run
    ADD COLUMN missed_fires bigint,
    ADD COLUMN missed_last_at timestamptz;
