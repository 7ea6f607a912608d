#include "profiler/store.h"

#include <sqlite3.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "profiler/context.h"
#include "runtime/error.h"

namespace kiln::profiler {

/// The migrations in resources/sql/, in order (generated at build time: schema_sql.cpp).
const std::vector<const char*>& schemaMigrations();

namespace {

constexpr int32_t kApplicationId = 0x4b494c4e;  // "KILN"
constexpr int kBusyTimeoutMs = 10000;

/// A prepared statement; errors throw through the owning store's message.
class Stmt {
 public:
  Stmt(sqlite3* db, const std::string& sql, const std::string& path) : m_db(db), m_path(path) {
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &m_stmt, nullptr) != SQLITE_OK) fail();
  }
  ~Stmt() { sqlite3_finalize(m_stmt); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& bind(int i, int64_t v) { return check(sqlite3_bind_int64(m_stmt, i, v)); }
  Stmt& bind(int i, int v) { return bind(i, static_cast<int64_t>(v)); }
  Stmt& bind(int i, double v) { return check(sqlite3_bind_double(m_stmt, i, v)); }
  Stmt& bind(int i, const std::string& v) {
    return check(sqlite3_bind_text(m_stmt, i, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
  }
  Stmt& bind(int i, const char* v) { return bind(i, std::string(v)); }
  Stmt& bindNull(int i) { return check(sqlite3_bind_null(m_stmt, i)); }
  /// NULL for 0 (an absent foreign key).
  Stmt& bindId(int i, int64_t id) { return id > 0 ? bind(i, id) : bindNull(i); }

  /// True while a row is available.
  bool step() {
    int rc = sqlite3_step(m_stmt);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail();
  }
  void run() {
    while (step()) {
    }
  }
  void reset() {
    sqlite3_reset(m_stmt);
    sqlite3_clear_bindings(m_stmt);
  }
  int64_t i64(int c) const { return sqlite3_column_int64(m_stmt, c); }
  double f64(int c) const { return sqlite3_column_double(m_stmt, c); }
  bool isNull(int c) const { return sqlite3_column_type(m_stmt, c) == SQLITE_NULL; }
  bool isText(int c) const { return sqlite3_column_type(m_stmt, c) == SQLITE_TEXT; }
  std::string text(int c) const {
    const unsigned char* t = sqlite3_column_text(m_stmt, c);
    return t ? reinterpret_cast<const char*>(t) : "";
  }

 private:
  Stmt& check(int rc) {
    if (rc != SQLITE_OK) fail();
    return *this;
  }
  [[noreturn]] void fail() const { throw Error(m_path + ": " + sqlite3_errmsg(m_db), ErrorKind::Io); }

  sqlite3* m_db;
  sqlite3_stmt* m_stmt = nullptr;
  const std::string& m_path;
};

std::string toJson(const std::vector<double>& v) { return nlohmann::json(v).dump(); }
std::string toJson(const std::vector<std::string>& v) { return nlohmann::json(v).dump(); }
std::string toJson(const std::vector<int64_t>& v) { return nlohmann::json(v).dump(); }

template <typename T>
std::vector<T> fromJson(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_array()) return {};
  try {
    return j.get<std::vector<T>>();
  } catch (const nlohmann::json::exception&) {
    return {};
  }
}

/// Refuses, before SQLite touches it, a non-empty file without the SQLite header.
void checkHeader(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return;
  if (std::filesystem::is_directory(path, ec))
    throw Error(path + ": is a directory, expected a database file", ErrorKind::Io);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot read file", ErrorKind::Io);
  char header[16] = {0};
  in.read(header, sizeof header);
  std::streamsize got = in.gcount();
  if (got == 0) return;  // empty: SQLite treats it as a new database
  if (got < 16 || std::memcmp(header, "SQLite format 3", 16) != 0)
    throw Error(path + ": not a SQLite database (refusing to touch it)", ErrorKind::Store);
}

}  // namespace

const StoredRun* SessionData::run(int64_t id) const {
  for (const auto& r : runs)
    if (r.id == id) return &r;
  return nullptr;
}

const MachineCeilings* SessionData::ceilingsOfRun(int64_t runId) const {
  const StoredRun* r = run(runId);
  if (!r || r->context.ceilingsId <= 0) return nullptr;
  for (const auto& c : ceilings)
    if (c.id == r->context.ceilingsId) return &c;
  return nullptr;
}

std::string Store::defaultPath() {
  const char* xdg = std::getenv("XDG_DATA_HOME");
  if (xdg && *xdg) return (std::filesystem::path(xdg) / "kiln" / "kiln.db").string();
  const char* home = std::getenv("HOME");
  return (std::filesystem::path(home && *home ? home : ".") / ".local" / "share" / "kiln" / "kiln.db")
      .string();
}

int Store::latestSchemaVersion() { return static_cast<int>(schemaMigrations().size()); }

Store::Store(const std::string& path, int migrateTo) : m_path(path) {
  checkHeader(path);
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec)
    throw Error(path + ": cannot create directory " + parent.string() + ": " + ec.message(), ErrorKind::Io);
  int rc = sqlite3_open_v2(path.c_str(), &m_db,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = m_db ? sqlite3_errmsg(m_db) : sqlite3_errstr(rc);
    sqlite3_close(m_db);
    throw Error(path + ": cannot open database: " + msg, ErrorKind::Io);
  }
  try {
    sqlite3_busy_timeout(m_db, kBusyTimeoutMs);
    // Read-only checks before anything is written, in one read transaction so that a migration
    // committed by another connection meanwhile is seen whole or not at all.
    int64_t appId = 0, version = 0, objects = 0;
    exec("BEGIN");
    {
      Stmt s(m_db, "PRAGMA application_id", m_path);
      if (s.step()) appId = s.i64(0);
    }
    {
      Stmt s(m_db, "PRAGMA user_version", m_path);
      if (s.step()) version = s.i64(0);
    }
    {
      Stmt s(m_db, "SELECT count(*) FROM sqlite_master", m_path);
      if (s.step()) objects = s.i64(0);
    }
    exec("COMMIT");
    if (appId != 0 && appId != kApplicationId)
      throw Error(path + ": a SQLite database of another application (application_id " +
                      std::to_string(appId) + "), not a Kiln session store",
                  ErrorKind::Store);
    if (appId == 0 && objects > 0)
      throw Error(path + ": a SQLite database that is not a Kiln session store (refusing to modify it)",
                  ErrorKind::Store);
    if (version > latestSchemaVersion())
      throw Error(path + ": written by a newer Kiln (schema version " + std::to_string(version) + " > " +
                      std::to_string(latestSchemaVersion()) + "); refusing to modify it",
                  ErrorKind::Store);
    enterWalMode();
    exec("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;");
    migrate(migrateTo);
  } catch (const Error& e) {
    sqlite3_close(m_db);
    m_db = nullptr;
    // SQLite's own refusals while opening (a corrupt file, a lock held past the busy timeout) are
    // the store's condition, not a plain I/O error.
    if (e.kind() == ErrorKind::Io) throw Error(e.what(), ErrorKind::Store);
    throw;
  } catch (...) {
    sqlite3_close(m_db);
    m_db = nullptr;
    throw;
  }
}

Store::~Store() { sqlite3_close(m_db); }

void Store::fail(const std::string& what) const {
  throw Error(m_path + ": " + what + ": " + sqlite3_errmsg(m_db), ErrorKind::Io);
}

void Store::exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(m_db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    throw Error(m_path + ": " + msg, ErrorKind::Io);
  }
}

// Switching a file into WAL mode needs it to itself for a moment, and SQLite answers "database is
// locked" at once (without its busy handler) while another connection reads it, e.g. one opening
// the same new file. The mode is kept in the file, so only the first opener switches it; the others
// retry until the busy timeout.
void Store::enterWalMode() {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kBusyTimeoutMs);
  for (;;) {
    int rc = sqlite3_exec(m_db, "PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr);
    if (rc == SQLITE_OK) return;
    if ((rc & 0xff) != SQLITE_BUSY || std::chrono::steady_clock::now() > deadline)
      fail("cannot enter WAL mode");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void Store::begin() { exec("BEGIN IMMEDIATE"); }
void Store::commit() { exec("COMMIT"); }
void Store::rollback() {
  if (!sqlite3_get_autocommit(m_db)) sqlite3_exec(m_db, "ROLLBACK", nullptr, nullptr, nullptr);
}

int Store::schemaVersion() {
  Stmt s(m_db, "PRAGMA user_version", m_path);
  return s.step() ? static_cast<int>(s.i64(0)) : 0;
}

void Store::migrate(int migrateTo) {
  const auto& migrations = schemaMigrations();
  int target = migrateTo < 0 || migrateTo > latestSchemaVersion() ? latestSchemaVersion() : migrateTo;
  if (schemaVersion() >= target) return;
  transaction([&] {
    // Another connection may have migrated while this one waited for the write lock.
    for (int v = schemaVersion(); v < target; ++v) exec(migrations[v]);
    if (schemaVersion() < target)
      exec("PRAGMA application_id=" + std::to_string(kApplicationId) +
           "; PRAGMA user_version=" + std::to_string(target));
  });
}

// ---- writing ------------------------------------------------------------------------------------

int64_t Store::addModel(const std::string& sha256, const std::string& name, const std::string& path,
                        int64_t sizeBytes) {
  Stmt up(m_db,
          "INSERT INTO models(sha256, name, path, size_bytes, first_seen) VALUES(?1, ?2, ?3, ?4, ?5) "
          "ON CONFLICT(sha256) DO UPDATE SET name = excluded.name, path = excluded.path",
          m_path);
  up.bind(1, sha256).bind(2, name).bind(3, path).bind(4, sizeBytes).bind(5, utcNow()).run();
  Stmt q(m_db, "SELECT id FROM models WHERE sha256 = ?1", m_path);
  q.bind(1, sha256);
  if (!q.step()) fail("model row missing after insert");
  return q.i64(0);
}

int64_t Store::sessionFor(int64_t modelId, int64_t requested) {
  if (requested > 0) {
    Stmt q(m_db, "SELECT model_id FROM sessions WHERE id = ?1", m_path);
    q.bind(1, requested);
    if (!q.step()) throw Error(m_path + ": no session " + std::to_string(requested), ErrorKind::Usage);
    if (q.i64(0) != modelId)
      throw Error(m_path + ": session " + std::to_string(requested) + " belongs to another model",
                  ErrorKind::Usage);
    Stmt u(m_db, "UPDATE sessions SET updated_at = ?1 WHERE id = ?2", m_path);
    u.bind(1, utcNow()).bind(2, requested).run();
    return requested;
  }
  if (requested == 0) {
    Stmt q(m_db, "SELECT id FROM sessions WHERE model_id = ?1 ORDER BY id DESC LIMIT 1", m_path);
    q.bind(1, modelId);
    if (q.step()) return sessionFor(modelId, q.i64(0));
  }
  Stmt ins(m_db, "INSERT INTO sessions(model_id, created_at, updated_at) VALUES(?1, ?2, ?2)", m_path);
  ins.bind(1, modelId).bind(2, utcNow()).run();
  return sqlite3_last_insert_rowid(m_db);
}

int64_t Store::addRun(int64_t sessionId, const std::string& kind, const RunContext& c) {
  Stmt s(m_db,
         "INSERT INTO runs(session_id, kind, created_at, cpu, physical_cores, hardware_threads, threads, "
         "target, "
         "opt_level, kiln_version, torch_version, llvm_version, blas, tuning_records, hostname, "
         "compile_seconds) "
         "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
         m_path);
  s.bind(1, sessionId).bind(2, kind).bind(3, c.date.empty() ? utcNow() : c.date).bind(4, c.cpu);
  s.bind(5, c.physicalCores)
      .bind(6, c.hardwareThreads)
      .bind(7, c.threads)
      .bind(8, c.target)
      .bind(9, c.optLevel);
  s.bind(10, c.kilnVersion).bind(11, c.torchVersion).bind(12, c.llvmVersion).bind(13, c.blas);
  s.bind(14, c.tuningRecords).bind(15, c.hostname).bind(16, c.compileSeconds).run();
  int64_t runId = sqlite3_last_insert_rowid(m_db);
  // Set apart so that a store opened at an older schema (tests of migrations) still takes runs.
  if (c.ceilingsId > 0) {
    Stmt u(m_db, "UPDATE runs SET ceilings_id = ?1 WHERE id = ?2", m_path);
    u.bind(1, c.ceilingsId).bind(2, runId).run();
  }
  return runId;
}

void Store::updateRunBuild(int64_t runId, const std::string& target, double compileSeconds) {
  Stmt s(m_db, "UPDATE runs SET target = ?1, compile_seconds = ?2 WHERE id = ?3", m_path);
  s.bind(1, target).bind(2, compileSeconds).bind(3, runId).run();
}

int64_t Store::addBuild(int64_t runId, const BuildRecord& b) {
  Stmt s(m_db,
         "INSERT INTO builds(run_id, target, opt_level, threads, batch, tuning_records, compile_seconds, "
         "num_kernels, num_calls, plan_bytes) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
         m_path);
  s.bind(1, runId).bind(2, b.target).bind(3, b.optLevel).bind(4, b.threads).bind(5, b.batch);
  s.bind(6, b.tuningRecords).bind(7, b.compileSeconds).bind(8, b.numKernels).bind(9, b.numCalls);
  s.bind(10, b.planBytes).run();
  return sqlite3_last_insert_rowid(m_db);
}

int64_t Store::addSweep(int64_t runId, const std::vector<int64_t>& batches,
                        const std::vector<std::string>& backends, double budgetSeconds) {
  Stmt s(m_db, "INSERT INTO sweeps(run_id, batches, backends, budget_seconds) VALUES(?1, ?2, ?3, ?4)",
         m_path);
  s.bind(1, runId).bind(2, toJson(batches)).bind(3, toJson(backends)).bind(4, budgetSeconds).run();
  return sqlite3_last_insert_rowid(m_db);
}

int64_t Store::addMeasurement(int64_t runId, int64_t buildId, int64_t sweepId, const Measurement& m) {
  Stmt s(
      m_db,
      "INSERT INTO measurements(run_id, build_id, sweep_id, backend, batch, status, reason, warmup, number, "
      "median_ms, min_ms, mean_ms, max_ms, stddev_ms, cv, throughput, max_abs_diff, samples_ms, "
      "process_medians_ms, processes_disagree, facts, output_bound) "
      "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22)",
      m_path);
  s.bind(1, runId).bindId(2, buildId).bindId(3, sweepId).bind(4, m.backend).bind(5, m.batch);
  s.bind(6, statusName(m.status)).bind(7, m.reason).bind(8, m.timing.warmup).bind(9, m.timing.number);
  const Timing& t = m.timing;
  if (m.ok()) {
    s.bind(10, t.medianMs).bind(11, t.minMs).bind(12, t.meanMs).bind(13, t.maxMs).bind(14, t.stddevMs);
    s.bind(15, t.cv()).bind(16, m.throughput());
  } else {
    for (int i = 10; i <= 16; ++i) s.bindNull(i);
  }
  // SQLite turns a bound NaN into NULL ("not checked"): a NaN difference is kept as text.
  if (std::isnan(m.maxAbsDiff))
    s.bind(17, "nan");
  else if (m.maxAbsDiff >= 0)
    s.bind(17, m.maxAbsDiff);
  else
    s.bindNull(17);
  s.bind(18, toJson(m.ok() ? t.samplesMs : std::vector<double>{}));
  s.bind(19, toJson(m.ok() ? m.processMedianMs : std::vector<double>{})).bind(20, m.processesDisagree ? 1 : 0);
  s.bind(21, m.facts.empty() ? std::string("{}") : m.facts);
  if (m.outputBound >= 0)
    s.bind(22, m.outputBound);
  else
    s.bindNull(22);
  s.run();
  return sqlite3_last_insert_rowid(m_db);
}

int64_t Store::addProfile(int64_t runId, int64_t buildId, const ProfileRecord& p) {
  Stmt s(m_db,
         "INSERT INTO profiles(run_id, build_id, batch, repeat, end_to_end_ms, sum_ms, sum_mean_ms, "
         "gap_percent, "
         "e2e_samples_ms) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
         m_path);
  s.bind(1, runId).bind(2, buildId).bind(3, p.batch).bind(4, p.repeat).bind(5, p.endToEnd.medianMs);
  s.bind(6, p.sumMs).bind(7, p.sumMeanMs).bind(8, p.gapPercent()).bind(9, toJson(p.endToEnd.samplesMs)).run();
  int64_t profileId = sqlite3_last_insert_rowid(m_db);
  Stmt row(
      m_db,
      "INSERT INTO op_profiles(profile_id, call_index, name, key, kernel, ops, time_us, mean_us, min_us, "
      "percent, calls, output_shape, input_shapes, flops, bytes, start_us, duration_us, parent_call) "
      "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)",
      m_path);
  for (const OpRecord& o : p.ops) {
    row.reset();
    row.bind(1, profileId)
        .bind(2, o.index)
        .bind(3, o.name)
        .bind(4, o.key)
        .bind(5, o.kernel)
        .bind(6, toJson(o.ops));
    row.bind(7, o.timeUs).bind(8, o.meanUs).bind(9, o.minUs).bind(10, o.percent).bind(11, o.calls);
    row.bind(12, o.outputShape).bind(13, toJson(o.inputShapes)).bind(14, o.flops).bind(15, o.bytes);
    row.bind(16, o.startUs).bind(17, o.durationUs).bind(18, o.parent).run();
  }
  return profileId;
}

int64_t Store::addTuningRecord(const TuningRecord& r, int64_t modelId, const std::string& kilnVersion) {
  Stmt s(
      m_db,
      "INSERT INTO tuning_records(workload_key, target, config, cost_ms, model_id, kiln_version, created_at) "
      "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
      m_path);
  s.bind(1, r.workloadKey).bind(2, r.target).bind(3, r.config).bind(4, r.costMs).bindId(5, modelId);
  s.bind(6, kilnVersion).bind(7, utcNow()).run();
  return sqlite3_last_insert_rowid(m_db);
}

int64_t Store::addCeilings(const MachineCeilings& c) {
  Stmt s(m_db,
         "INSERT INTO machine_ceilings(machine_key, cpu, threads, vector_bits, peak_gflops, method, measured_at) "
         "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
         m_path);
  s.bind(1, c.machineKey).bind(2, c.cpu).bind(3, c.threads).bind(4, c.vectorBits).bind(5, c.peakGflops);
  s.bind(6, c.method).bind(7, c.measuredAt.empty() ? utcNow() : c.measuredAt).run();
  int64_t id = sqlite3_last_insert_rowid(m_db);
  Stmt b(m_db,
         "INSERT INTO bandwidth_ceilings(ceilings_id, position, level, capacity_bytes, working_set_bytes, "
         "gb_per_second) VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
         m_path);
  for (size_t i = 0; i < c.bandwidth.size(); ++i) {
    const BandwidthCeiling& w = c.bandwidth[i];
    b.reset();
    b.bind(1, id).bind(2, static_cast<int64_t>(i)).bind(3, w.level).bind(4, w.capacityBytes);
    b.bind(5, w.workingSetBytes).bind(6, w.gbPerSecond).run();
  }
  return id;
}

// ---- reading ------------------------------------------------------------------------------------

namespace {

constexpr const char* kSessionColumns =
    "s.id, s.created_at, s.updated_at, s.label, m.id, m.sha256, m.name, m.path, m.size_bytes, m.first_seen, "
    "(SELECT count(*) FROM runs r WHERE r.session_id = s.id), "
    "(SELECT count(*) FROM builds b JOIN runs r ON b.run_id = r.id WHERE r.session_id = s.id), "
    "(SELECT count(*) FROM measurements x JOIN runs r ON x.run_id = r.id WHERE r.session_id = s.id), "
    "(SELECT count(*) FROM profiles p JOIN runs r ON p.run_id = r.id WHERE r.session_id = s.id), "
    "(SELECT count(*) FROM sweeps w JOIN runs r ON w.run_id = r.id WHERE r.session_id = s.id) "
    "FROM sessions s JOIN models m ON s.model_id = m.id";

SessionSummary readSummary(const Stmt& q) {
  SessionSummary s;
  s.id = q.i64(0);
  s.createdAt = q.text(1);
  s.updatedAt = q.text(2);
  s.label = q.text(3);
  s.model = ModelInfo{q.i64(4), q.text(5), q.text(6), q.text(7), q.i64(8), q.text(9)};
  s.runs = static_cast<int>(q.i64(10));
  s.builds = static_cast<int>(q.i64(11));
  s.measurements = static_cast<int>(q.i64(12));
  s.profiles = static_cast<int>(q.i64(13));
  s.sweeps = static_cast<int>(q.i64(14));
  return s;
}

constexpr const char* kBuildColumns =
    "b.id, b.run_id, b.target, b.opt_level, b.threads, b.batch, b.tuning_records, b.compile_seconds, "
    "b.num_kernels, "
    "b.num_calls, b.plan_bytes FROM builds b";

StoredBuild readBuild(const Stmt& q) {
  StoredBuild b;
  b.id = q.i64(0);
  b.runId = q.i64(1);
  b.build.target = q.text(2);
  b.build.optLevel = static_cast<int>(q.i64(3));
  b.build.threads = static_cast<int>(q.i64(4));
  b.build.batch = q.i64(5);
  b.build.tuningRecords = q.text(6);
  b.build.compileSeconds = q.f64(7);
  b.build.numKernels = static_cast<int>(q.i64(8));
  b.build.numCalls = static_cast<int>(q.i64(9));
  b.build.planBytes = q.i64(10);
  return b;
}

constexpr const char* kProfileColumns =
    "p.id, p.run_id, p.build_id, p.batch, p.repeat, p.sum_ms, p.e2e_samples_ms, p.sum_mean_ms FROM profiles "
    "p";

}  // namespace

std::vector<SessionSummary> Store::listSessions() {
  Stmt q(m_db, std::string("SELECT ") + kSessionColumns + " ORDER BY s.id", m_path);
  std::vector<SessionSummary> out;
  while (q.step()) out.push_back(readSummary(q));
  return out;
}

bool Store::hasSession(int64_t id) {
  Stmt q(m_db, "SELECT 1 FROM sessions WHERE id = ?1", m_path);
  q.bind(1, id);
  return q.step();
}

std::optional<StoredBuild> Store::build(int64_t id) {
  Stmt q(m_db, std::string("SELECT ") + kBuildColumns + " WHERE b.id = ?1", m_path);
  q.bind(1, id);
  if (!q.step()) return std::nullopt;
  return readBuild(q);
}

int64_t Store::sessionOfBuild(int64_t buildId) {
  Stmt q(m_db, "SELECT r.session_id FROM builds b JOIN runs r ON b.run_id = r.id WHERE b.id = ?1", m_path);
  q.bind(1, buildId);
  return q.step() ? q.i64(0) : 0;
}

namespace {

std::vector<StoredProfile> readProfiles(sqlite3* db, const std::string& path, const std::string& where,
                                        int64_t arg) {
  std::vector<StoredProfile> out;
  Stmt q(db, std::string("SELECT ") + kProfileColumns + " " + where, path);
  q.bind(1, arg);
  while (q.step()) {
    StoredProfile p;
    p.id = q.i64(0);
    p.runId = q.i64(1);
    p.buildId = q.i64(2);
    p.profile.batch = q.i64(3);
    p.profile.repeat = static_cast<int>(q.i64(4));
    p.profile.sumMs = q.f64(5);
    p.profile.endToEnd = timingFromSamples(fromJson<double>(q.text(6)));
    p.profile.sumMeanMs = q.f64(7);
    out.push_back(std::move(p));
  }
  for (StoredProfile& p : out) {
    Stmt o(
        db,
        "SELECT call_index, name, key, kernel, ops, time_us, mean_us, min_us, percent, calls, output_shape, "
        "input_shapes, flops, bytes, start_us, duration_us, parent_call FROM op_profiles WHERE profile_id = ?1 "
        "ORDER BY call_index",
        path);
    o.bind(1, p.id);
    while (o.step()) {
      OpRecord r;
      r.index = static_cast<int>(o.i64(0));
      r.name = o.text(1);
      r.key = o.text(2);
      r.kernel = o.text(3);
      r.ops = fromJson<std::string>(o.text(4));
      r.timeUs = o.f64(5);
      r.meanUs = o.f64(6);
      r.minUs = o.f64(7);
      r.percent = o.f64(8);
      r.calls = static_cast<int>(o.i64(9));
      r.outputShape = o.text(10);
      r.inputShapes = fromJson<std::string>(o.text(11));
      r.flops = o.f64(12);
      r.bytes = o.f64(13);
      r.startUs = o.f64(14);
      r.durationUs = o.f64(15);
      r.parent = static_cast<int>(o.i64(16));
      p.profile.ops.push_back(std::move(r));
    }
  }
  return out;
}

}  // namespace

namespace {

constexpr int kCeilingsSchema = 5;

std::optional<MachineCeilings> readCeilings(sqlite3* db, const std::string& path, const std::string& where,
                                            const std::string& key, int64_t arg) {
  Stmt q(db,
         "SELECT id, machine_key, cpu, threads, vector_bits, peak_gflops, method, measured_at FROM machine_ceilings " +
             where,
         path);
  if (!key.empty()) q.bind(1, key).bind(2, arg);
  else q.bind(1, arg);
  if (!q.step()) return std::nullopt;
  MachineCeilings c;
  c.id = q.i64(0);
  c.machineKey = q.text(1);
  c.cpu = q.text(2);
  c.threads = static_cast<int>(q.i64(3));
  c.vectorBits = static_cast<int>(q.i64(4));
  c.peakGflops = q.f64(5);
  c.method = q.text(6);
  c.measuredAt = q.text(7);
  Stmt b(db,
         "SELECT level, capacity_bytes, working_set_bytes, gb_per_second FROM bandwidth_ceilings WHERE ceilings_id = ?1 "
         "ORDER BY position",
         path);
  b.bind(1, c.id);
  while (b.step()) c.bandwidth.push_back(BandwidthCeiling{b.text(0), b.i64(1), b.i64(2), b.f64(3)});
  return c;
}

}  // namespace

std::optional<MachineCeilings> Store::latestCeilings(const std::string& machineKey, int threads) {
  if (schemaVersion() < kCeilingsSchema) return std::nullopt;
  return readCeilings(m_db, m_path, "WHERE machine_key = ?1 AND threads = ?2 ORDER BY id DESC LIMIT 1", machineKey,
                      threads);
}

std::optional<MachineCeilings> Store::ceilings(int64_t id) {
  if (schemaVersion() < kCeilingsSchema) return std::nullopt;
  return readCeilings(m_db, m_path, "WHERE id = ?1", "", id);
}

std::optional<MachineCeilings> Store::ceilingsOfRun(int64_t runId) {
  if (schemaVersion() < kCeilingsSchema) return std::nullopt;
  Stmt q(m_db, "SELECT ceilings_id FROM runs WHERE id = ?1", m_path);
  q.bind(1, runId);
  if (!q.step() || q.isNull(0)) return std::nullopt;
  return ceilings(q.i64(0));
}

std::optional<StoredProfile> Store::latestProfile(int64_t buildId) {
  auto profiles = readProfiles(m_db, m_path, "WHERE p.build_id = ?1 ORDER BY p.id DESC LIMIT 1", buildId);
  if (profiles.empty()) return std::nullopt;
  return std::move(profiles.front());
}

std::optional<SessionData> Store::loadSession(int64_t id) {
  SessionData d;
  {
    Stmt q(m_db, std::string("SELECT ") + kSessionColumns + " WHERE s.id = ?1", m_path);
    q.bind(1, id);
    if (!q.step()) return std::nullopt;
    d.summary = readSummary(q);
  }
  {
    Stmt q(m_db,
           "SELECT id, kind, created_at, cpu, physical_cores, hardware_threads, threads, target, opt_level, "
           "kiln_version, torch_version, llvm_version, blas, tuning_records, hostname, compile_seconds "
           "FROM runs WHERE session_id = ?1 ORDER BY id",
           m_path);
    q.bind(1, id);
    while (q.step()) {
      StoredRun r;
      r.id = q.i64(0);
      r.kind = q.text(1);
      r.createdAt = q.text(2);
      RunContext& c = r.context;
      c.date = r.createdAt;
      c.cpu = q.text(3);
      c.physicalCores = static_cast<int>(q.i64(4));
      c.hardwareThreads = static_cast<int>(q.i64(5));
      c.threads = static_cast<int>(q.i64(6));
      c.target = q.text(7);
      c.optLevel = static_cast<int>(q.i64(8));
      c.kilnVersion = q.text(9);
      c.torchVersion = q.text(10);
      c.llvmVersion = q.text(11);
      c.blas = q.text(12);
      c.tuningRecords = q.text(13);
      c.hostname = q.text(14);
      c.compileSeconds = q.f64(15);
      d.runs.push_back(std::move(r));
    }
  }
  if (schemaVersion() >= kCeilingsSchema) {
    std::set<int64_t> referenced;
    for (StoredRun& r : d.runs) {
      Stmt q(m_db, "SELECT ceilings_id FROM runs WHERE id = ?1", m_path);
      q.bind(1, r.id);
      if (q.step() && !q.isNull(0)) r.context.ceilingsId = q.i64(0);
      if (r.context.ceilingsId > 0) referenced.insert(r.context.ceilingsId);
    }
    for (int64_t cid : referenced)
      if (auto c = ceilings(cid)) d.ceilings.push_back(std::move(*c));
  }
  {
    Stmt q(m_db,
           std::string("SELECT ") + kBuildColumns +
               " JOIN runs r ON b.run_id = r.id WHERE r.session_id = ?1 ORDER BY b.id",
           m_path);
    q.bind(1, id);
    while (q.step()) d.builds.push_back(readBuild(q));
  }
  {
    Stmt q(m_db,
           "SELECT x.id, x.run_id, x.build_id, x.sweep_id, x.backend, x.batch, x.status, x.reason, x.warmup, "
           "x.number, x.max_abs_diff, x.samples_ms, x.process_medians_ms, x.processes_disagree, x.facts, "
           "x.output_bound FROM measurements x JOIN runs r ON x.run_id = r.id "
           "WHERE r.session_id = ?1 ORDER BY x.id",
           m_path);
    q.bind(1, id);
    while (q.step()) {
      StoredMeasurement s;
      s.id = q.i64(0);
      s.runId = q.i64(1);
      s.buildId = q.isNull(2) ? 0 : q.i64(2);
      s.sweepId = q.isNull(3) ? 0 : q.i64(3);
      Measurement& m = s.measurement;
      m.backend = q.text(4);
      m.batch = q.i64(5);
      m.status = parseStatus(q.text(6));
      m.reason = q.text(7);
      m.timing = timingFromSamples(fromJson<double>(q.text(11)), static_cast<int>(q.i64(9)));
      m.timing.warmup = static_cast<int>(q.i64(8));
      m.maxAbsDiff = q.isNull(10) ? -1 : q.isText(10) ? NAN : q.f64(10);
      m.processMedianMs = fromJson<double>(q.text(12));
      m.processesDisagree = q.i64(13) != 0;
      m.facts = q.text(14);
      if (m.facts == "{}") m.facts.clear();
      m.outputBound = q.isNull(15) ? -1 : q.f64(15);
      d.measurements.push_back(std::move(s));
    }
  }
  {
    Stmt q(m_db,
           "SELECT w.id, w.run_id, w.batches, w.backends, w.budget_seconds FROM sweeps w JOIN runs r ON "
           "w.run_id = r.id WHERE r.session_id = ?1 ORDER BY w.id",
           m_path);
    q.bind(1, id);
    while (q.step())
      d.sweeps.push_back(StoredSweep{q.i64(0), q.i64(1), fromJson<int64_t>(q.text(2)),
                                     fromJson<std::string>(q.text(3)), q.f64(4)});
  }
  d.profiles =
      readProfiles(m_db, m_path, "JOIN runs r ON p.run_id = r.id WHERE r.session_id = ?1 ORDER BY p.id", id);
  return d;
}

std::vector<TuningRecord> Store::tuningRecords(const std::string& workloadKey, const std::string& target) {
  // An empty key: every workload's records for the target.
  Stmt q(m_db,
         "SELECT workload_key, target, config, cost_ms FROM tuning_records WHERE (?1 = '' OR workload_key = ?1) "
         "AND target = ?2 ORDER BY cost_ms",
         m_path);
  q.bind(1, workloadKey).bind(2, target);
  std::vector<TuningRecord> out;
  while (q.step()) out.push_back(TuningRecord{q.text(0), q.text(1), q.text(2), q.f64(3)});
  return out;
}

}  // namespace kiln::profiler
