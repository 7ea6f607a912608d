-- Schema version 6: a comparison flags a row whose outputs lie further from PyTorch eager's than
-- a bound: a tolerance of eager's largest output (profiler::outputBound; 1e-3 for float models,
-- 0.2 for int8 ones). Each measurement keeps the bound it was held to; NULL where it was not
-- checked or was stored before (such rows are never flagged).
ALTER TABLE measurements ADD COLUMN output_bound REAL;
