-- cronbox functions, no Python: one dispatch batch
SELECT * FROM cronbox.dispatch(:batch);
