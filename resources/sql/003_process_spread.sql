-- Schema version 3: every backend is measured in worker processes of its own (profiler/bench.h).
-- A measurement keeps the median of each process and whether they disagree (differ by more than
-- 10 %): the figure then depends on the process, not only on the code.
ALTER TABLE measurements ADD COLUMN process_medians_ms TEXT NOT NULL DEFAULT '[]';
ALTER TABLE measurements ADD COLUMN processes_disagree INTEGER NOT NULL DEFAULT 0;
