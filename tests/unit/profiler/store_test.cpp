// The SQLite session store on real files in a temporary directory: round trip, migrations,
// two connections at once, and refusing files it must not touch.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "profiler/sha256.h"
#include "profiler/report.h"
#include "profiler/store.h"
#include "runtime/error.h"

namespace kiln::profiler {
namespace {

namespace fs = std::filesystem;

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device rd;
    m_dir = fs::temp_directory_path() / ("kiln_store_test_" + std::to_string(rd()));
    fs::create_directories(m_dir);
  }
  void TearDown() override { fs::remove_all(m_dir); }
  std::string path(const std::string& name) const { return (m_dir / name).string(); }
  static std::string readAll(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  fs::path m_dir;
};

RunContext sampleContext() {
  RunContext c;
  c.cpu = "Test CPU";
  c.physicalCores = 4;
  c.hardwareThreads = 8;
  c.threads = 2;
  c.target = "llvm -mcpu=znver3";
  c.optLevel = 3;
  c.kilnVersion = "0.1.0";
  c.torchVersion = "1.13.1";
  c.llvmVersion = "19.1.7";
  c.blas = "/usr/lib/libopenblas.so.0";
  c.date = "2026-01-02T03:04:05Z";
  c.hostname = "host";
  c.compileSeconds = 1.5;
  return c;
}

ProfileRecord sampleProfile() {
  ProfileRecord p;
  p.batch = 1;
  p.repeat = 3;
  p.endToEnd = timingFromSamples({10.0, 11.0, 12.0});
  for (int i = 0; i < 3; ++i) {
    OpRecord op;
    op.index = i;
    op.name = "%y" + std::to_string(i) + " = @fused_conv2d_relu_" + std::to_string(i);
    op.key = "y" + std::to_string(i);
    op.kernel = "fused_conv2d_relu_" + std::to_string(i);
    op.ops = {"conv2d", "relu"};
    op.timeUs = 1000.0 * (i + 1);
    op.percent = 100.0 * (i + 1) / 6;
    op.outputShape = "f32[1,8,4,4]";
    op.inputShapes = {"f32[1,8,4,4]", "f32[8,8,3,3]"};
    op.flops = 1e6;
    op.bytes = 4096;
    op.startUs = i * 1000.0;
    op.durationUs = 1000.0;
    p.ops.push_back(op);
    p.sumMs += op.timeUs / 1000;
  }
  return p;
}

TEST_F(StoreTest, RoundTripOfASession) {
  std::string db = path("kiln.db");
  int64_t sessionId = 0, buildId = 0;
  {
    Store store(db);
    EXPECT_EQ(store.schemaVersion(), Store::latestSchemaVersion());
    store.transaction([&] {
      int64_t model = store.addModel(sha256Hex("model bytes"), "resnet18", "/m/resnet18.pt", 11);
      EXPECT_EQ(store.addModel(sha256Hex("model bytes"), "resnet18", "/m/elsewhere.pt", 11),
                model);  // by hash
      sessionId = store.sessionFor(model, 0);
      EXPECT_EQ(store.sessionFor(model, 0), sessionId);  // the latest is reused
      int64_t run = store.addRun(sessionId, "profile", sampleContext());
      BuildRecord b;
      b.target = "llvm -mcpu=znver3";
      b.threads = 2;
      b.numKernels = 20;
      b.numCalls = 24;
      b.compileSeconds = 1.5;
      buildId = store.addBuild(run, b);
      Measurement ok;
      ok.backend = "kiln";
      ok.batch = 4;
      ok.timing = timingFromSamples({2.0, 2.5, 3.0}, 7);
      store.addMeasurement(run, buildId, 0, ok);
      Measurement na;
      na.backend = "torch-compile";
      na.status = Status::Unavailable;
      na.reason = "torch.compile needs torch >= 2.0, found 1.13.1 at /usr/bin/python3";
      store.addMeasurement(run, 0, 0, na);
      store.addProfile(run, buildId, sampleProfile());
      int64_t sweepRun = store.addRun(sessionId, "sweep", sampleContext());
      store.addSweep(sweepRun, {1, 4}, {"kiln", "pytorch-eager"}, 60);
    });
  }
  Store store(db);
  auto sessions = store.listSessions();
  ASSERT_EQ(sessions.size(), 1u);
  EXPECT_EQ(sessions[0].model.name, "resnet18");
  EXPECT_EQ(sessions[0].model.path, "/m/elsewhere.pt");
  EXPECT_EQ(sessions[0].runs, 2);
  EXPECT_EQ(sessions[0].profiles, 1);
  EXPECT_EQ(sessions[0].sweeps, 1);

  auto data = store.loadSession(sessionId);
  ASSERT_TRUE(data.has_value());
  ASSERT_EQ(data->runs.size(), 2u);
  EXPECT_EQ(data->runs[0].context.cpu, "Test CPU");
  EXPECT_EQ(data->runs[0].context.llvmVersion, "19.1.7");
  EXPECT_EQ(data->runs[0].context.blas, "/usr/lib/libopenblas.so.0");
  EXPECT_DOUBLE_EQ(data->runs[0].context.compileSeconds, 1.5);
  ASSERT_EQ(data->measurements.size(), 2u);
  const Measurement& m = data->measurements[0].measurement;
  EXPECT_EQ(m.backend, "kiln");
  EXPECT_EQ(m.timing.samplesMs, (std::vector<double>{2.0, 2.5, 3.0}));
  EXPECT_EQ(m.timing.number, 7);
  EXPECT_DOUBLE_EQ(m.timing.medianMs, 2.5);
  EXPECT_EQ(data->measurements[0].buildId, buildId);
  const Measurement& na = data->measurements[1].measurement;
  EXPECT_EQ(na.status, Status::Unavailable);
  EXPECT_TRUE(na.timing.samplesMs.empty());
  EXPECT_NE(na.reason.find("1.13.1"), std::string::npos);
  ASSERT_EQ(data->sweeps.size(), 1u);
  EXPECT_EQ(data->sweeps[0].batches, (std::vector<int64_t>{1, 4}));
  ASSERT_EQ(data->profiles.size(), 1u);
  const ProfileRecord& p = data->profiles[0].profile;
  ASSERT_EQ(p.ops.size(), 3u);
  EXPECT_EQ(p.ops[2].ops, (std::vector<std::string>{"conv2d", "relu"}));
  EXPECT_EQ(p.ops[1].inputShapes.size(), 2u);
  EXPECT_DOUBLE_EQ(p.ops[2].timeUs, 3000.0);
  EXPECT_DOUBLE_EQ(p.endToEnd.medianMs, 11.0);
  auto latest = store.latestProfile(buildId);
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(store.sessionOfBuild(buildId), sessionId);

  // A new session on request, and a session of another model is refused.
  int64_t other = store.addModel(sha256Hex("other"), "other", "/m/other.pt", 5);
  EXPECT_THROW(store.sessionFor(other, sessionId), Error);
  EXPECT_NE(store.sessionFor(other, -1), sessionId);
}

TEST_F(StoreTest, MigratesAnOlderSchemaKeepingItsData) {
  std::string db = path("old.db");
  {
    Store v1(db, 1);
    EXPECT_EQ(v1.schemaVersion(), 1);
    v1.addModel(sha256Hex("m"), "m", "/m.pt", 1);
    EXPECT_THROW(v1.exec("SELECT * FROM tuning_records"), Error);  // not there yet
  }
  Store latest(db);
  EXPECT_EQ(latest.schemaVersion(), Store::latestSchemaVersion());
  EXPECT_GE(Store::latestSchemaVersion(), 2);
  ASSERT_EQ(latest.listSessions().size(), 0u);
  int64_t model = latest.addModel(sha256Hex("m"), "m", "/m.pt", 1);
  EXPECT_EQ(model, 1);  // the row from version 1 survived
  TuningRecord r{"conv2d(f32[1,8,8,8])", "llvm", "{\"tile\":8}", 0.5};
  latest.addTuningRecord(r, model, "0.1.0");
  auto records = latest.tuningRecords(r.workloadKey, "llvm");
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].config, "{\"tile\":8}");
}

TEST_F(StoreTest, ASessionOfAnOlderKilnStillListsAndReports) {
  // Schema 3 (before each measurement kept its backend's facts), with the row older Kiln named
  // "pytorch-compiled": it loads with its name and numbers, no facts, and reports.
  std::string db = path("v3.db");
  int64_t session = 0;
  {
    Store v3(db, 3);
    int64_t model = v3.addModel(sha256Hex("old"), "old", "/old.pt", 1);
    session = v3.sessionFor(model, 0);
    int64_t run = v3.addRun(session, "compare", sampleContext());
    v3.exec("INSERT INTO measurements(run_id, backend, batch, status, number, median_ms, samples_ms) VALUES(" +
            std::to_string(run) + ", 'pytorch-compiled', 1, 'ok', 1, 2.0, '[1.0,2.0,3.0]')");
    EXPECT_THROW(v3.exec("SELECT facts FROM measurements"), Error);  // not there yet
  }
  Store latest(db);
  ASSERT_EQ(latest.listSessions().size(), 1u);
  auto data = latest.loadSession(session);
  ASSERT_TRUE(data);
  ASSERT_EQ(data->measurements.size(), 1u);
  const Measurement& old = data->measurements[0].measurement;
  EXPECT_EQ(old.backend, "pytorch-compiled");
  EXPECT_EQ(old.timing.samplesMs.size(), 3u);
  EXPECT_TRUE(old.facts.empty());
  EXPECT_LT(old.outputBound, 0);  // stored before Kiln kept the bound: never flagged
  EXPECT_FALSE(old.outputsDiffer());
  EXPECT_NE(sessionReportHtml(*data).find("pytorch-compiled"), std::string::npos);
  EXPECT_NE(sessionReportCsv(*data).find("pytorch-compiled"), std::string::npos);

  // A new measurement keeps its facts beside it.
  Measurement m;
  m.backend = "onnxruntime";
  m.timing = timingFromSamples({1.0, 1.5});
  m.facts = R"({"onnxruntime_version":"1.32.0","intra_op_threads":2})";
  m.maxAbsDiff = 7.7;
  m.outputBound = 0.0066;
  latest.addMeasurement(data->runs[0].id, 0, 0, m);
  data = latest.loadSession(session);
  ASSERT_EQ(data->measurements.size(), 2u);
  const Measurement& now = data->measurements[1].measurement;
  EXPECT_EQ(now.facts, m.facts);
  EXPECT_DOUBLE_EQ(now.outputBound, 0.0066);
  EXPECT_TRUE(now.outputsDiffer());
  // The report flags the row whose outputs differ.
  EXPECT_NE(sessionReportHtml(*data).find("✗ outputs differ from eager"), std::string::npos);
}

TEST(OutputTolerance, FlagsRowsBeyondAToleranceOfTheReferenceScale) {
  const double bound = outputBound(6.6, kOutputTolerance);
  EXPECT_DOUBLE_EQ(bound, 0.0066);
  EXPECT_FALSE(outputsDiffer(2e-4, bound));
  EXPECT_FALSE(outputsDiffer(6.5e-3, bound));
  EXPECT_TRUE(outputsDiffer(6.7e-3, bound));
  EXPECT_TRUE(outputsDiffer(7.7, bound));
  // Small outputs (probabilities, a scale below 1) are held to the tolerance absolute, not less.
  EXPECT_DOUBLE_EQ(outputBound(0.01, kOutputTolerance), 1e-3);
  // int8 models: engines requantize to different steps.
  EXPECT_DOUBLE_EQ(outputBound(6.6, kQuantizedOutputTolerance), 1.32);
  // A NaN on one side, and outputs of another shape (infinite), differ; exact agreement does not.
  EXPECT_TRUE(outputsDiffer(NAN, bound));
  EXPECT_TRUE(outputsDiffer(INFINITY, bound));
  EXPECT_FALSE(outputsDiffer(0, 1e-3));
  // Not checked (no eager row), or stored without its bound: nothing to flag.
  EXPECT_FALSE(outputsDiffer(-1, bound));
  EXPECT_FALSE(outputsDiffer(7.7, -1));
}

TEST_F(StoreTest, UsesWalModeAndMarksTheFile) {
  std::string db = path("wal.db");
  Store store(db);
  sqlite3_stmt* s = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(store.handle(), "PRAGMA journal_mode", -1, &s, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(s), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)), "wal");
  sqlite3_finalize(s);
}

TEST_F(StoreTest, TwoConnectionsWriteConcurrently) {
  std::string db = path("shared.db");
  constexpr int kRuns = 25;
  auto writer = [&](const std::string& name) {
    Store store(db);  // both open (and possibly migrate) at the same time
    for (int i = 0; i < kRuns; ++i) {
      store.transaction([&] {
        int64_t model = store.addModel(sha256Hex(name), name, "/" + name, 1);
        int64_t session = store.sessionFor(model, 0);
        store.addRun(session, "compare", sampleContext());
      });
    }
  };
  std::thread a(writer, "a"), b(writer, "b");
  a.join();
  b.join();
  Store store(db);
  auto sessions = store.listSessions();
  ASSERT_EQ(sessions.size(), 2u);
  EXPECT_EQ(sessions[0].runs + sessions[1].runs, 2 * kRuns);
}

TEST_F(StoreTest, RefusesAFileThatIsNotADatabase) {
  std::string p = path("notes.txt");
  std::string text(3000, 'x');
  std::ofstream(p) << text;
  try {
    Store store(p);
    FAIL() << "opened a text file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a SQLite database"), std::string::npos) << e.what();
    EXPECT_EQ(e.kind(), ErrorKind::Store);
  }
  EXPECT_EQ(readAll(p), text);  // untouched
  EXPECT_FALSE(fs::exists(p + "-wal"));
}

TEST_F(StoreTest, RefusesADatabaseFromANewerKiln) {
  std::string db = path("future.db");
  {
    Store store(db);
    store.exec("PRAGMA user_version = 99");
  }
  std::string before = readAll(db);
  try {
    Store store(db);
    FAIL() << "opened a newer schema";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("newer Kiln"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("99"), std::string::npos) << e.what();
  }
  EXPECT_EQ(readAll(db), before);
}

TEST_F(StoreTest, RefusesAnotherApplicationsDatabase) {
  std::string db = path("other.db");
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw, "CREATE TABLE contacts(name TEXT); INSERT INTO contacts VALUES('x');", nullptr,
                         nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(raw);
  std::string before = readAll(db);
  EXPECT_THROW(Store store(db), Error);
  EXPECT_EQ(readAll(db), before);
}

TEST_F(StoreTest, DefaultPathFollowsXdgDataHome) {
  const char* old = std::getenv("XDG_DATA_HOME");
  std::string saved = old ? old : "";
  setenv("XDG_DATA_HOME", m_dir.c_str(), 1);
  EXPECT_EQ(Store::defaultPath(), (m_dir / "kiln" / "kiln.db").string());
  Store store(Store::defaultPath());  // creates the directory
  EXPECT_TRUE(fs::exists(m_dir / "kiln" / "kiln.db"));
  if (old)
    setenv("XDG_DATA_HOME", saved.c_str(), 1);
  else
    unsetenv("XDG_DATA_HOME");
  if (!old) {
    const char* home = std::getenv("HOME");
    if (home) {
      EXPECT_EQ(Store::defaultPath(), (fs::path(home) / ".local/share/kiln/kiln.db").string());
    }
  }
}

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  std::string million(1000000, 'a');
  EXPECT_EQ(sha256Hex(million), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // Split updates give the same digest.
  Sha256 h;
  for (size_t i = 0; i < million.size(); i += 997)
    h.update(million.data() + i, std::min<size_t>(997, million.size() - i));
  EXPECT_EQ(h.hexDigest(), sha256Hex(million));
}

}  // namespace
}  // namespace kiln::profiler
