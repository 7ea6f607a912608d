-- Kiln session store, schema version 1: models, sessions, runs (with their context), builds,
-- measurements (with raw samples), sweeps and per-operator profiles.
-- Times are ISO 8601 UTC text; sample lists are JSON arrays of milliseconds (µs for op samples).

CREATE TABLE models (
  id          INTEGER PRIMARY KEY,
  sha256      TEXT NOT NULL UNIQUE,          -- content hash of the model file
  name        TEXT NOT NULL,
  path        TEXT NOT NULL,                 -- where it was last opened from
  size_bytes  INTEGER NOT NULL,
  first_seen  TEXT NOT NULL
);

-- What a user did with one model; commands append to the model's latest session by default.
CREATE TABLE sessions (
  id          INTEGER PRIMARY KEY,
  model_id    INTEGER NOT NULL REFERENCES models(id),
  created_at  TEXT NOT NULL,
  updated_at  TEXT NOT NULL,
  label       TEXT NOT NULL DEFAULT ''
);
CREATE INDEX sessions_by_model ON sessions(model_id, id);

-- One command (compare, profile, sweep) and the context it ran in.
CREATE TABLE runs (
  id                INTEGER PRIMARY KEY,
  session_id        INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  kind              TEXT NOT NULL,
  created_at        TEXT NOT NULL,
  cpu               TEXT NOT NULL,
  physical_cores    INTEGER NOT NULL,
  hardware_threads  INTEGER NOT NULL,
  threads           INTEGER NOT NULL,
  target            TEXT NOT NULL,
  opt_level         INTEGER NOT NULL,
  kiln_version      TEXT NOT NULL,
  torch_version     TEXT NOT NULL,
  llvm_version      TEXT NOT NULL,
  blas              TEXT NOT NULL,
  tuning_records    TEXT NOT NULL,
  hostname          TEXT NOT NULL,
  compile_seconds   REAL NOT NULL
);
CREATE INDEX runs_by_session ON runs(session_id, id);

-- One Kiln compilation that results refer to.
CREATE TABLE builds (
  id               INTEGER PRIMARY KEY,
  run_id           INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  target           TEXT NOT NULL,
  opt_level        INTEGER NOT NULL,
  threads          INTEGER NOT NULL,
  batch            INTEGER NOT NULL,
  tuning_records   TEXT NOT NULL,
  compile_seconds  REAL NOT NULL,
  num_kernels      INTEGER NOT NULL,
  num_calls        INTEGER NOT NULL,
  plan_bytes       INTEGER NOT NULL
);
CREATE INDEX builds_by_run ON builds(run_id);

CREATE TABLE sweeps (
  id              INTEGER PRIMARY KEY,
  run_id          INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  batches         TEXT NOT NULL,   -- JSON array
  backends        TEXT NOT NULL,   -- JSON array
  budget_seconds  REAL NOT NULL
);

-- One backend at one batch size. status: ok | unavailable | failed | out-of-memory | timeout |
-- skipped; only ok rows carry numbers.
CREATE TABLE measurements (
  id            INTEGER PRIMARY KEY,
  run_id        INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  build_id      INTEGER REFERENCES builds(id) ON DELETE CASCADE,
  sweep_id      INTEGER REFERENCES sweeps(id) ON DELETE CASCADE,
  backend       TEXT NOT NULL,
  batch         INTEGER NOT NULL,
  status        TEXT NOT NULL,
  reason        TEXT NOT NULL DEFAULT '',
  warmup        INTEGER NOT NULL DEFAULT 0,
  number        INTEGER NOT NULL DEFAULT 1,
  median_ms     REAL,
  min_ms        REAL,
  mean_ms       REAL,
  max_ms        REAL,
  stddev_ms     REAL,
  cv            REAL,
  throughput    REAL,                     -- items per second at the median
  max_abs_diff  REAL,                     -- vs PyTorch eager, when checked
  samples_ms    TEXT NOT NULL DEFAULT '[]'
);
CREATE INDEX measurements_by_run ON measurements(run_id);

CREATE TABLE profiles (
  id               INTEGER PRIMARY KEY,
  run_id           INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  build_id         INTEGER NOT NULL REFERENCES builds(id) ON DELETE CASCADE,
  batch            INTEGER NOT NULL,
  repeat           INTEGER NOT NULL,
  end_to_end_ms    REAL NOT NULL,        -- median
  sum_ms           REAL NOT NULL,        -- sum of per-call medians
  sum_mean_ms      REAL NOT NULL,        -- sum of per-call means
  gap_percent      REAL NOT NULL,        -- end-to-end mean vs sum_mean_ms
  e2e_samples_ms   TEXT NOT NULL
);
CREATE INDEX profiles_by_build ON profiles(build_id);

CREATE TABLE op_profiles (
  id            INTEGER PRIMARY KEY,
  profile_id    INTEGER NOT NULL REFERENCES profiles(id) ON DELETE CASCADE,
  call_index    INTEGER NOT NULL,
  name          TEXT NOT NULL,
  key           TEXT NOT NULL,           -- output value names: the same operator across builds
  kernel        TEXT NOT NULL,
  ops           TEXT NOT NULL,           -- JSON array of graph operators inside the call
  time_us       REAL NOT NULL,           -- median
  mean_us       REAL NOT NULL,
  min_us        REAL NOT NULL,
  percent       REAL NOT NULL,
  calls         INTEGER NOT NULL,
  output_shape  TEXT NOT NULL,
  input_shapes  TEXT NOT NULL,           -- JSON array
  flops         REAL NOT NULL,
  bytes         REAL NOT NULL,
  start_us      REAL NOT NULL,           -- in the timeline run
  duration_us   REAL NOT NULL
);
CREATE INDEX op_profiles_by_profile ON op_profiles(profile_id, call_index);
