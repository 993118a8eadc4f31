-- 0441: cronbox.run.trouble becomes a plain column. It was generated (STORED) from state, for
-- runs updated in place; history rows are now inserted once, final, and never updated, so
-- the statements that insert them write it (cronbox.run_trouble(state), the one rule) and no
-- insert pays for the generation expression: PostgreSQL 15 reads, plans and compiles a
-- stored generated column's expression at the start of every statement that inserts into the
-- table (about a tenth of a single report's CPU). Values already stored stay as they are.
ALTER TABLE cronbox.run ALTER COLUMN trouble DROP EXPRESSION;
COMMENT ON COLUMN cronbox.run.trouble IS
    'The state when it is failed, lost, cancelled, skipped or missed, else NULL (cronbox.run_trouble(state), written with the row): indexed by run_trouble_history_idx.';
