-- Schema version 2: tuning records (schedule knobs chosen per workload by the autotuner),
-- kept beside the JSON-lines files so builds can say which records they used.
CREATE TABLE tuning_records (
  id             INTEGER PRIMARY KEY,
  workload_key   TEXT NOT NULL,
  target         TEXT NOT NULL,
  config         TEXT NOT NULL,          -- JSON: the schedule knobs
  cost_ms        REAL NOT NULL,          -- measured time of the candidate
  model_id       INTEGER REFERENCES models(id),
  kiln_version   TEXT NOT NULL,
  created_at     TEXT NOT NULL
);
CREATE INDEX tuning_by_workload ON tuning_records(workload_key, target, cost_ms);
