// Robustness end to end (issue 7), on the real `kiln` binary, a real SQLite store and real JIT
// kernels:
// - durability: `kiln tune` and `kiln sweep` killed with SIGKILL keep every record they had
//   reported as done, the store passes PRAGMA integrity_check, and resuming measures nothing
//   twice; the CLI processes share one store at the same time without "database is locked";
// - isolation: a kernel made to crash, overflow its stack (the worker's main thread's or a pool
//   thread's) or hang (KILN_FAULT, honoured only by the measuring worker) is one clear error
//   line with its own exit code, and fails only its point in a sweep.
// No timing thresholds; kills happen after a reported completion plus a fixed delay.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "profiler/subprocess.h"
#include "tests/e2e/process.h"

namespace {

namespace fs = std::filesystem;
using kiln::testing_support::Outcome;
using Clock = std::chrono::steady_clock;

/// This test process's scratch folder, emptied on first use (an earlier process of the same pid
/// may have left its stores there).
fs::path tempDir() {
  static const fs::path d = [] {
    fs::path fresh = fs::temp_directory_path() / ("kiln_durability_" + std::to_string(::getpid()));
    fs::remove_all(fresh);
    return fresh;
  }();
  fs::create_directories(d);
  return d;
}

std::string model() { return std::string(KILN_MODELS_DIR) + "/ops/conv_bn_relu.pt"; }

Outcome kiln(const std::string& args, const std::string& env = "") {
  static int n = 0;
  return kiln::testing_support::runProcess(env + " " + std::string(KILN_BINARY) + " " + args,
                                           (tempDir() / ("stderr" + std::to_string(n++) + ".txt")).string());
}

std::string readFile(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// `kiln ARGS` in the background with stderr in a file, killed with SIGKILL once `done(stderr)`
/// holds and `delayMs` more have passed (or when it ends by itself). Returns the stderr seen
/// before the kill and whether it was killed.
std::pair<std::string, bool> runAndKill(const std::vector<std::string>& args, const std::function<bool(const std::string&)>& done,
                                        int delayMs, double limitSeconds = 120) {
  static int n = 0;
  fs::path errPath = tempDir() / ("killed" + std::to_string(n++) + ".txt");
  int fd = ::open(errPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  std::vector<std::string> argv{KILN_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  std::string why;
  int pid = kiln::profiler::spawnProcess(argv, -1, -1, fd, why);
  ::close(fd);
  EXPECT_GT(pid, 0) << why;
  if (pid <= 0) return {"", false};
  auto deadline = Clock::now() + std::chrono::duration<double>(limitSeconds);
  int status = 0;
  while (Clock::now() < deadline) {
    if (::waitpid(pid, &status, WNOHANG) == pid) return {readFile(errPath), false};
    if (done(readFile(errPath))) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(delayMs));
  std::string seen = readFile(errPath);  // everything it reported before dying
  bool killed = ::kill(pid, SIGKILL) == 0;
  ::waitpid(pid, &status, 0);
  killed = killed && WIFSIGNALED(status);
  return {seen, killed};
}

/// Runs a query on the store with SQLite directly; rows as text.
std::vector<std::vector<std::string>> query(const fs::path& db, const std::string& sql) {
  sqlite3* h = nullptr;
  std::vector<std::vector<std::string>> rows;
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    sqlite3_close(h);
    ADD_FAILURE() << db << ": cannot open";
    return rows;
  }
  sqlite3_busy_timeout(h, 10000);
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(h, sql.c_str(), -1, &s, nullptr) == SQLITE_OK) {
    while (sqlite3_step(s) == SQLITE_ROW) {
      std::vector<std::string> row;
      for (int c = 0; c < sqlite3_column_count(s); ++c) {
        const unsigned char* t = sqlite3_column_text(s, c);
        row.push_back(t ? reinterpret_cast<const char*>(t) : "");
      }
      rows.push_back(std::move(row));
    }
  } else {
    ADD_FAILURE() << sql << ": " << sqlite3_errmsg(h);
  }
  sqlite3_finalize(s);
  sqlite3_close(h);
  return rows;
}

int count(const fs::path& db, const std::string& table) { return std::stoi(query(db, "SELECT count(*) FROM " + table)[0][0]); }

int lastNumber(const std::string& text, const std::regex& re) {
  int last = 0;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it)
    last = std::max(last, std::stoi((*it)[1]));
  return last;
}

int occurrences(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

constexpr int kTrials = 30;  // per task: enough that a run outlasts the second kill

std::vector<std::string> tuneArgs(const fs::path& db, const fs::path& records, int trials = kTrials) {
  return {"tune",
          model(),
          "--tasks",
          "conv2d_nchwc",
          "--tuner",
          "random",
          "--trials",
          std::to_string(trials),
          "--batch-size",
          "3",
          "--threads",
          "1",
          "--no-compare",
          "--confirm",
          "0",
          "--db",
          db.string(),
          "--records",
          records.string(),
          "--seed",
          "5"};
}

/// (workload key, knobs) of every stored tuning record; a duplicate was measured twice.
std::vector<std::pair<std::string, std::string>> storedTrials(const fs::path& db) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& row : query(db, "SELECT workload_key, config FROM tuning_records"))
    out.emplace_back(row[0], nlohmann::json::parse(row[1])["knobs"].get<std::string>());
  return out;
}

/// Candidates a finished tuning run measured (its --json file).
int measuredIn(const fs::path& json) {
  int n = 0;
  nlohmann::json r = nlohmann::json::parse(readFile(json));
  for (const auto& t : r["tasks"]) n += t["measured"].get<int>();
  return n;
}

TEST(Durability, KilledTuneKeepsEveryReportedRecordAndResumes) {
  fs::path db = tempDir() / "tune.db", records = tempDir() / "tune.jsonl", json = tempDir() / "tune.json";
  std::regex measured(R"((\d+) measured by this run)");
  int kept = 0;
  // Two kills, each some time after the run reported its second record.
  for (int delayMs : {300, 1200}) {
    auto [err, killed] = runAndKill(tuneArgs(db, records), [&](const std::string& e) { return lastNumber(e, measured) >= 2; },
                                    delayMs);
    ASSERT_TRUE(killed) << "the run ended before it could be killed:\n" << err;
    int reported = lastNumber(err, measured);
    EXPECT_EQ(query(db, "PRAGMA integrity_check")[0][0], "ok");
    int stored = count(db, "tuning_records");
    // Every record reported as written is there (one more may have been stored just before the kill).
    EXPECT_GE(stored, kept + reported) << err;
    auto trials = storedTrials(db);
    EXPECT_EQ(std::set(trials.begin(), trials.end()).size(), trials.size()) << "a candidate was measured twice";
    kept = stored;
  }
  // The third run finishes: it counts every kept record and measures only the rest.
  std::vector<std::string> args = tuneArgs(db, records);
  std::string line;
  for (const auto& a : args) line += " '" + a + "'";
  Outcome last = kiln(line + " --json " + json.string());
  ASSERT_EQ(last.exitCode, 0) << last.err;
  nlohmann::json r = nlohmann::json::parse(readFile(json));
  int skipped = 0, fresh = 0;
  for (const auto& t : r["tasks"]) {
    skipped += t["skipped"].get<int>();
    fresh += t["measured"].get<int>();
  }
  EXPECT_EQ(skipped, kept);
  EXPECT_EQ(skipped + fresh, kTrials * static_cast<int>(r["tasks"].size()));
  auto trials = storedTrials(db);
  EXPECT_EQ(static_cast<int>(trials.size()), kept + fresh);
  EXPECT_EQ(std::set(trials.begin(), trials.end()).size(), trials.size()) << "a candidate was measured twice";
  EXPECT_EQ(query(db, "PRAGMA integrity_check")[0][0], "ok");
}

std::vector<std::string> sweepArgs(const fs::path& db) {
  return {"sweep", model(), "--batches", "1,2,4", "--backends", "kiln,pytorch-eager", "--repeat", "3", "--budget", "5",
          "--threads", "1", "--db", db.string()};
}

TEST(Durability, KilledSweepKeepsItsPointsAndResumes) {
  fs::path db = tempDir() / "sweep.db", json = tempDir() / "sweep.json";
  auto [err, killed] =
      runAndKill(sweepArgs(db), [](const std::string& e) { return occurrences(e, "  stored ") >= 2; }, 200);
  ASSERT_TRUE(killed) << err;
  int reported = occurrences(err, "  stored ");
  EXPECT_EQ(query(db, "PRAGMA integrity_check")[0][0], "ok");
  int stored = count(db, "measurements");
  EXPECT_GE(stored, reported) << err;
  EXPECT_LT(stored, 6);

  std::string line;
  for (const auto& a : sweepArgs(db)) line += " '" + a + "'";
  Outcome resumed = kiln(line + " --resume --json " + json.string());
  ASSERT_EQ(resumed.exitCode, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("resumed: " + std::to_string(stored) + " of 6 points"), std::string::npos) << resumed.out;
  // The resumed run measured only what was missing, into the same sweep.
  EXPECT_EQ(occurrences(resumed.err, "  stored "), 6 - stored) << resumed.err;
  auto rows = query(db, "SELECT backend, batch FROM measurements");
  std::set<std::vector<std::string>> distinct(rows.begin(), rows.end());
  EXPECT_EQ(rows.size(), 6u);
  EXPECT_EQ(distinct.size(), 6u);
  EXPECT_EQ(count(db, "sweeps"), 1);
  nlohmann::json j = nlohmann::json::parse(readFile(json));
  EXPECT_EQ(j["points"].size(), 6u);
  EXPECT_EQ(query(db, "PRAGMA integrity_check")[0][0], "ok");
}

TEST(Durability, CliProcessesShareOneStore) {
  fs::path db = tempDir() / "shared.db", records = tempDir() / "shared.jsonl", json = tempDir() / "shared.json";
  // A tuning run writing a record per candidate while other commands read and write the store.
  fs::path errPath = tempDir() / "shared_tune.txt";
  int fd = ::open(errPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  std::vector<std::string> argv{KILN_BINARY};
  for (const auto& a : tuneArgs(db, records)) argv.push_back(a);
  argv.insert(argv.end(), {"--json", json.string()});
  std::string why;
  int tune = kiln::profiler::spawnProcess(argv, -1, -1, fd, why);
  ::close(fd);
  ASSERT_GT(tune, 0) << why;
  int others = 0, status = 0;
  while (::waitpid(tune, &status, WNOHANG) == 0) {
    Outcome list = kiln("sessions list --db " + db.string());
    EXPECT_EQ(list.exitCode, 0) << list.err;
    Outcome prof = kiln("profile " + model() + " --repeat 2 --threads 1 --db " + db.string());
    EXPECT_EQ(prof.exitCode, 0) << prof.err;
    EXPECT_EQ(prof.err.find("locked"), std::string::npos) << prof.err;
    ++others;
  }
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << readFile(errPath);
  EXPECT_GE(others, 1);
  EXPECT_EQ(count(db, "tuning_records"), measuredIn(json));
  EXPECT_EQ(count(db, "profiles"), others);
  EXPECT_EQ(query(db, "PRAGMA integrity_check")[0][0], "ok");
}

TEST(Durability, AppendAfterATornLineStartsANewLine) {
  fs::path records = tempDir() / "torn.jsonl", db = tempDir() / "torn.db", json = tempDir() / "torn.json";
  auto args = [&](int trials) {
    std::string line;
    for (const auto& a : tuneArgs(db, records, trials)) line += " '" + a + "'";
    return line + " --json " + json.string();
  };
  ASSERT_EQ(kiln(args(2)).exitCode, 0);
  int first = measuredIn(json);
  {
    std::ofstream out(records, std::ios::app);
    out << "{\"key\":\"conv2d_nchwc:trunc";  // a record cut by a kill mid-write
  }
  Outcome o = kiln(args(4));
  ASSERT_EQ(o.exitCode, 0) << o.err;
  EXPECT_NE(o.err.find("skipped 1 bad line(s)"), std::string::npos) << o.err;
  // The torn line stays one bad line: the next record started on a line of its own.
  std::ifstream in(records);
  std::string l;
  int good = 0, bad = 0;
  while (std::getline(in, l)) (nlohmann::json::parse(l, nullptr, false).is_object() ? good : bad) += 1;
  EXPECT_EQ(bad, 1);
  EXPECT_EQ(good, first + measuredIn(json));
}

// ---- isolation ----------------------------------------------------------------------------------

TEST(Isolation, CrashingKernelIsOneErrorLineWithItsOwnExitCode) {
  fs::path db = tempDir() / "iso.db";
  Outcome o = kiln("profile " + model() + " --isolate --repeat 2 --threads 1 --db " + db.string(), "KILN_FAULT=crash:conv");
  EXPECT_EQ(o.exitCode, 7) << o.out << o.err;
  EXPECT_FALSE(o.signaled);
  EXPECT_EQ(occurrences(o.err, "\n"), 1) << o.err;
  EXPECT_TRUE(std::regex_search(o.err, std::regex(R"(^error: .*conv_bn_relu\.pt: kernel crashed \(signal 11\) in \S*conv)")))
      << o.err;
  EXPECT_EQ(count(db, "profiles"), 0);
  // A profile is isolated by default now.
  Outcome byDefault = kiln("profile " + model() + " --repeat 2 --threads 1 --no-store", "KILN_FAULT=crash:conv");
  EXPECT_EQ(byDefault.exitCode, 7) << byDefault.err;
  // The same kernel runs fine in-process: the fault hook is the worker's only.
  Outcome plain = kiln("profile " + model() + " --in-process --repeat 2 --threads 1 --no-store", "KILN_FAULT=crash:conv");
  EXPECT_EQ(plain.exitCode, 0) << plain.err;
}

TEST(Isolation, StackOverflowInAKernelIsNamed) {
  // No stack is left to run the fault handler on: it runs on an alternate signal stack.
  Outcome o = kiln("profile " + model() + " --isolate --repeat 2 --threads 1 --no-store", "KILN_FAULT=stack:conv");
  EXPECT_EQ(o.exitCode, 7) << o.out << o.err;
  EXPECT_FALSE(o.signaled);
  EXPECT_EQ(occurrences(o.err, "\n"), 1) << o.err;
  EXPECT_TRUE(std::regex_search(o.err, std::regex(R"(^error: .*conv_bn_relu\.pt: kernel crashed \(signal 11\) in \S*conv)")))
      << o.err;
}

TEST(Isolation, StackOverflowOnAPoolThreadIsNamed) {
  // At two threads the injected overflow happens in a parallel launch on the pool's thread, not
  // the worker's main thread: the handler needs the pool thread's own alternate signal stack.
  Outcome o = kiln("profile " + model() + " --isolate --repeat 2 --threads 2 --no-store", "KILN_FAULT=stack:conv");
  EXPECT_EQ(o.exitCode, 7) << o.out << o.err;
  EXPECT_FALSE(o.signaled);
  EXPECT_EQ(occurrences(o.err, "\n"), 1) << o.err;
  EXPECT_TRUE(std::regex_search(o.err, std::regex(R"(^error: .*conv_bn_relu\.pt: kernel crashed \(signal 11\) in \S*conv)")))
      << o.err;
}

TEST(Isolation, HangingKernelTimesOut) {
  auto start = Clock::now();
  Outcome o = kiln("profile " + model() + " --isolate --timeout 2 --repeat 2 --threads 1 --no-store", "KILN_FAULT=hang:conv");
  EXPECT_EQ(o.exitCode, 7) << o.err;
  EXPECT_TRUE(std::regex_search(o.err, std::regex(R"(^error: .*: timed out after 2 s in \S*conv)"))) << o.err;
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 60);
}

TEST(Isolation, IsolatedProfileMatchesInProcess) {
  fs::path a = tempDir() / "in.json", b = tempDir() / "iso.json", db = tempDir() / "same.db";
  ASSERT_EQ(kiln("profile " + model() + " --repeat 3 --threads 1 --no-store --json " + a.string()).exitCode, 0);
  Outcome o = kiln("profile " + model() + " --isolate --repeat 3 --threads 1 --db " + db.string() + " --json " + b.string());
  ASSERT_EQ(o.exitCode, 0) << o.err;
  auto x = nlohmann::json::parse(readFile(a)), y = nlohmann::json::parse(readFile(b));
  for (const char* k : {"num_kernels", "num_calls", "fused_functions", "target", "opt_level", "batch", "plan_bytes"})
    EXPECT_EQ(x["build"][k], y["build"][k]) << k;
  ASSERT_EQ(x["calls"].size(), y["calls"].size());
  for (size_t i = 0; i < x["calls"].size(); ++i) {
    EXPECT_EQ(x["calls"][i]["kernel"], y["calls"][i]["kernel"]);
    EXPECT_EQ(x["calls"][i]["flops"], y["calls"][i]["flops"]);
  }
  // The parent stored exactly what the worker measured.
  auto e2e = query(db, "SELECT e2e_samples_ms FROM profiles");
  ASSERT_EQ(e2e.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(e2e[0][0]), y["end_to_end_ms"]["samples"]);
}

/// The rows of a `kiln compare --json` file by backend name.
std::map<std::string, nlohmann::json> compareRows(const fs::path& json) {
  auto j = nlohmann::json::parse(readFile(json));
  std::map<std::string, nlohmann::json> byName;
  for (const auto& b : j["backends"]) byName[b["backend"].get<std::string>()] = b;
  return byName;
}

TEST(Isolation, CompareRunsEachBackendInItsOwnProcesses) {
  fs::path json = tempDir() / "compare.json";
  Outcome o = kiln("compare " + model() + " --no-torch-compile --repeat 4 --processes 2 --threads 1 --no-store --json " +
                   json.string());
  ASSERT_EQ(o.exitCode, 0) << o.err;
  auto rows = compareRows(json);
  std::set<int> pids;
  for (const char* name : {"pytorch-eager", "torchscript-optimized", "onnxruntime", "openvino", "kiln"}) {
    ASSERT_TRUE(rows.count(name)) << name;
    const auto& row = rows[name];
    ASSERT_EQ(row["status"], "ok") << row.dump();
    // Two worker processes of its own, each giving a median; four repeats spread over them.
    ASSERT_EQ(row["pids"].size(), 2u) << row.dump();
    for (int pid : row["pids"]) EXPECT_TRUE(pids.insert(pid).second) << "pid " << pid << " shared: " << row.dump();
    EXPECT_EQ(row["process_median_ms"].size(), 2u);
    EXPECT_EQ(row["samples"].size(), 4u);
    EXPECT_LE(row["q1_ms"].get<double>(), row["median_ms"].get<double>());
    EXPECT_LE(row["median_ms"].get<double>(), row["q3_ms"].get<double>());
  }
  // The workers' outputs came back and were checked against PyTorch eager's here.
  EXPECT_EQ(rows["pytorch-eager"]["max_abs_diff_vs_eager"].get<double>(), 0.0);
  for (const char* name : {"torchscript-optimized", "onnxruntime", "openvino", "kiln"})
    EXPECT_LT(rows[name]["max_abs_diff_vs_eager"].get<double>(), 1e-3) << name;
  EXPECT_EQ(rows["kiln"]["output_preview"].size(), rows["pytorch-eager"]["output_preview"].size());
}

TEST(Isolation, ACrashingOrHangingKilnFailsOnlyItsRow) {
  // Kiln's generated code crashes: its row fails with the kernel named, the PyTorch rows are
  // measured all the same, and the command still says (exit 7) that Kiln's code faulted.
  fs::path json = tempDir() / "crash_compare.json";
  Outcome crash = kiln("compare " + model() + " --no-torch-compile --repeat 3 --processes 1 --threads 1 --no-store "
                       "--json " + json.string(),
                       "KILN_FAULT=crash:conv");
  EXPECT_EQ(crash.exitCode, 7) << crash.err;
  EXPECT_NE(crash.err.find("kernel crashed (signal 11) in"), std::string::npos) << crash.err;
  auto rows = compareRows(json);
  EXPECT_EQ(rows["kiln"]["status"], "failed") << rows["kiln"].dump();
  EXPECT_NE(rows["kiln"]["reason"].get<std::string>().find("kernel crashed (signal 11) in"), std::string::npos);
  for (const char* name : {"pytorch-eager", "torchscript-optimized", "onnxruntime", "openvino"}) {
    EXPECT_EQ(rows[name]["status"], "ok") << rows[name].dump();
    EXPECT_EQ(rows[name]["samples"].size(), 3u);
  }

  // It hangs: its row times out after --timeout, the others are measured.
  Outcome hang = kiln("compare " + model() + " --no-torch-compile --repeat 3 --processes 1 --threads 1 --no-store "
                      "--timeout 3 --json " + json.string(),
                      "KILN_FAULT=hang:conv");
  EXPECT_EQ(hang.exitCode, 7) << hang.err;
  rows = compareRows(json);
  EXPECT_EQ(rows["kiln"]["status"], "timeout") << rows["kiln"].dump();
  EXPECT_NE(rows["kiln"]["reason"].get<std::string>().find("timed out after 3 s in"), std::string::npos)
      << rows["kiln"].dump();
  EXPECT_EQ(rows["pytorch-eager"]["status"], "ok");
  EXPECT_EQ(rows["torchscript-optimized"]["status"], "ok");
  EXPECT_EQ(rows["onnxruntime"]["status"], "ok");
}

TEST(Isolation, CrashFailsOnlyItsSweepPoint) {
  fs::path json = tempDir() / "crash_sweep.json";
  Outcome o = kiln("sweep " + model() + " --batches 1,2 --backends kiln,pytorch-eager --repeat 3 --budget 5 "
                   "--threads 1 --no-store --json " + json.string(),
                   "KILN_FAULT=crash:conv");
  ASSERT_EQ(o.exitCode, 0) << o.err;
  auto j = nlohmann::json::parse(readFile(json));
  std::map<std::string, nlohmann::json> points;  // "backend@batch"
  for (const auto& p : j["points"])
    points[p["backend"].get<std::string>() + "@" + std::to_string(p["batch"].get<int>())] = p;
  EXPECT_EQ(points["kiln@1"]["status"], "failed");
  EXPECT_NE(points["kiln@1"]["reason"].get<std::string>().find("kernel crashed (signal 11) in"), std::string::npos)
      << points["kiln@1"].dump();
  EXPECT_EQ(points["kiln@2"]["status"], "skipped");
  EXPECT_EQ(points["pytorch-eager@1"]["status"], "ok");
  EXPECT_EQ(points["pytorch-eager@2"]["status"], "ok");
}

}  // namespace
