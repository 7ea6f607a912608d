// The session store: everything Kiln measures, kept in one SQLite file that the CLI and the
// Workbench share.
//
// - Sharing and durability: WAL mode, so readers never block the writer; a busy timeout of 10 s,
//   so a second writer (the CLI while the Workbench tunes) waits instead of failing with
//   SQLITE_BUSY; every write in one BEGIN IMMEDIATE transaction (transaction()), one per tuning
//   record, per sweep point and per profile, so a kill -9 loses at most the one in flight.
//   synchronous=NORMAL: in WAL mode a commit is then durable against a killed process (the
//   kernel holds what was written) but not against a power cut, which may lose the last commits
//   (never corrupt the file); FULL would fsync every commit for a guarantee measurements do not
//   need.
//
// - Schema: resources/sql/NNN_*.sql, embedded at build time and applied in order as migrations;
//   PRAGMA user_version is the schema version and PRAGMA application_id marks a Kiln database.
//   A file that is not SQLite, another application's database or one written by a newer Kiln is
//   refused with a clear kiln::Error (Io) before anything is written to it.
// - Models are identified by the SHA-256 of their file; a session groups the runs (commands with
//   their context) made on one model; builds, measurements, sweeps and per-operator profiles hang
//   off runs.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "profiler/ceilings.h"
#include "profiler/records.h"

struct sqlite3;

namespace kiln::profiler {

struct ModelInfo {
  int64_t id = 0;
  std::string sha256, name, path;
  int64_t sizeBytes = 0;
  std::string firstSeen;
};

struct SessionSummary {
  int64_t id = 0;
  ModelInfo model;
  std::string createdAt, updatedAt, label;
  int runs = 0, builds = 0, measurements = 0, profiles = 0, sweeps = 0;
};

struct StoredRun {
  int64_t id = 0;
  std::string kind;  // compare | profile | sweep
  std::string createdAt;
  RunContext context;
};

struct StoredBuild {
  int64_t id = 0, runId = 0;
  BuildRecord build;
};

struct StoredMeasurement {
  int64_t id = 0, runId = 0, buildId = 0, sweepId = 0;  // 0: none
  Measurement measurement;
};

struct StoredSweep {
  int64_t id = 0, runId = 0;
  std::vector<int64_t> batches;
  std::vector<std::string> backends;
  double budgetSeconds = 0;
};

struct StoredProfile {
  int64_t id = 0, runId = 0, buildId = 0;
  ProfileRecord profile;
};

/// Everything kept for one session, oldest first.
struct SessionData {
  SessionSummary summary;
  std::vector<StoredRun> runs;
  std::vector<StoredBuild> builds;
  std::vector<StoredMeasurement> measurements;
  std::vector<StoredSweep> sweeps;
  std::vector<StoredProfile> profiles;
  /// The machine ceilings the runs refer to (RunContext::ceilingsId).
  std::vector<MachineCeilings> ceilings;
  const StoredRun* run(int64_t id) const;
  /// The ceilings run `runId` refers to, if any.
  const MachineCeilings* ceilingsOfRun(int64_t runId) const;
};

class Store {
 public:
  /// $XDG_DATA_HOME/kiln/kiln.db, else ~/.local/share/kiln/kiln.db.
  static std::string defaultPath();
  static int latestSchemaVersion();

  /// Opens (creating the file and its directory when needed) and migrates up to `migrateTo`
  /// (default: the latest version). Throws kiln::Error (Io) with the reason.
  explicit Store(const std::string& path, int migrateTo = -1);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  const std::string& path() const { return m_path; }
  int schemaVersion();

  /// Runs `fn` in one IMMEDIATE transaction; rolls back and rethrows if it throws.
  template <typename Fn>
  auto transaction(Fn&& fn) {
    begin();
    try {
      if constexpr (std::is_void_v<decltype(fn())>) {
        fn();
        commit();
      } else {
        auto r = fn();
        commit();
        return r;
      }
    } catch (...) {
      rollback();
      throw;
    }
  }

  // ---- writing --------------------------------------------------------------------------------
  /// The model with this content hash (inserted, or its path/name refreshed).
  int64_t addModel(const std::string& sha256, const std::string& name, const std::string& path,
                   int64_t sizeBytes);
  /// `requested` > 0: that session (must belong to the model); 0: the model's latest session
  /// (created if none); < 0: a new session.
  int64_t sessionFor(int64_t modelId, int64_t requested);
  int64_t addRun(int64_t sessionId, const std::string& kind, const RunContext& context);
  /// Completes a run's target and compile time once known (a sweep files its run before its
  /// first build, so that each point can be committed as soon as it is measured).
  void updateRunBuild(int64_t runId, const std::string& target, double compileSeconds);
  int64_t addBuild(int64_t runId, const BuildRecord& build);
  int64_t addSweep(int64_t runId, const std::vector<int64_t>& batches,
                   const std::vector<std::string>& backends, double budgetSeconds);
  /// buildId / sweepId 0: none.
  int64_t addMeasurement(int64_t runId, int64_t buildId, int64_t sweepId, const Measurement& m);
  int64_t addProfile(int64_t runId, int64_t buildId, const ProfileRecord& profile);
  int64_t addTuningRecord(const TuningRecord& record, int64_t modelId, const std::string& kilnVersion);
  /// Stores measured machine ceilings (their id is ignored) and returns the new id.
  int64_t addCeilings(const MachineCeilings& ceilings);

  // ---- reading --------------------------------------------------------------------------------
  std::vector<SessionSummary> listSessions();
  std::optional<SessionData> loadSession(int64_t id);
  bool hasSession(int64_t id);
  std::optional<StoredBuild> build(int64_t id);
  /// The session a build belongs to (0 when unknown).
  int64_t sessionOfBuild(int64_t buildId);
  /// The most recent profile of a build.
  std::optional<StoredProfile> latestProfile(int64_t buildId);
  /// The latest ceilings measured for this machine key and thread count.
  std::optional<MachineCeilings> latestCeilings(const std::string& machineKey, int threads);
  std::optional<MachineCeilings> ceilings(int64_t id);
  /// The ceilings a run refers to (RunContext::ceilingsId), if any.
  std::optional<MachineCeilings> ceilingsOfRun(int64_t runId);
  /// Tuning records of a workload ("" : of every workload) for a target, fastest first.
  std::vector<TuningRecord> tuningRecords(const std::string& workloadKey, const std::string& target);

  /// Executes SQL text (several statements) directly; for tests and maintenance.
  void exec(const std::string& sql);
  sqlite3* handle() { return m_db; }

 private:
  void enterWalMode();
  void begin();
  void commit();
  void rollback();
  void migrate(int migrateTo);
  [[noreturn]] void fail(const std::string& what) const;

  std::string m_path;
  sqlite3* m_db = nullptr;
};

}  // namespace kiln::profiler
