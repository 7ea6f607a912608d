-- Schema version 5: the machine's roofline ceilings (profiler/ceilings.h), measured once per
-- machine and thread count and reused while the machine key (SHA-256 of the CPU model, flags,
-- caches and hardware threads) and the thread count match; a re-measurement adds a row, the
-- latest wins. A run refers to the ceilings that were valid when it ran (NULL: none measured).
CREATE TABLE machine_ceilings (
  id            INTEGER PRIMARY KEY,
  machine_key   TEXT NOT NULL,
  cpu           TEXT NOT NULL,
  threads       INTEGER NOT NULL,
  vector_bits   INTEGER NOT NULL,
  peak_gflops   REAL NOT NULL,           -- f32 FMA, all threads
  method        TEXT NOT NULL,
  measured_at   TEXT NOT NULL
);
CREATE INDEX ceilings_by_machine ON machine_ceilings(machine_key, threads, id);

-- One bandwidth per level (L1, L2, L3, DRAM), in order.
CREATE TABLE bandwidth_ceilings (
  id                  INTEGER PRIMARY KEY,
  ceilings_id         INTEGER NOT NULL REFERENCES machine_ceilings(id) ON DELETE CASCADE,
  position            INTEGER NOT NULL,
  level               TEXT NOT NULL,
  capacity_bytes      INTEGER NOT NULL,   -- what the threads may keep at this level; 0: DRAM
  working_set_bytes   INTEGER NOT NULL,   -- the triad's arrays, all threads
  gb_per_second       REAL NOT NULL
);
CREATE INDEX bandwidth_by_ceilings ON bandwidth_ceilings(ceilings_id, position);

ALTER TABLE runs ADD COLUMN ceilings_id INTEGER REFERENCES machine_ceilings(id);
