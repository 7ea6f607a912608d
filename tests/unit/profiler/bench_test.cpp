// The side-by-side engine (profiler/bench.h) with real worker processes: a small Python program
// that speaks the bench protocol and does a known amount of work per call (it sleeps, spins,
// crashes or hangs as its setup says), so the engine's scheduling, statistics and failure
// handling are checked on real processes without a model.
#include "profiler/bench.h"

#include <gtest/gtest.h>

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "profiler/core_latency.h"
#include "profiler/subprocess.h"

namespace kiln::profiler {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// setup: {"ms": per-call sleep, "ms_by_process": [..] (by arrival order in a shared counter
// file), "crash_in": "setup"|"run", "hang_in": "run", "log": file}. Each run appends
// "<name> <number>" to the log, so the test sees the order the engine ran the workers in.
constexpr const char* kWorker = R"py(
import json, os, signal, sys, time
conf, call, calls = None, None, 0
for line in sys.stdin:
    q = json.loads(line)
    if q["op"] == "exit":
        break
    if q["op"] == "setup":
        conf = q
        if conf.get("crash_in") == "setup":
            os.kill(os.getpid(), signal.SIGSEGV)
        ms = conf["ms"]
        if "ms_by_process" in conf:
            with open(conf["counter"], "a+") as f:
                f.seek(0)
                index = len(f.read())
                f.write("x")
            ms = conf["ms_by_process"][index]
        out = os.path.join(q["output_dir"], "out0.txt")
        open(out, "w").write(conf["name"])
        print("not a protocol line", flush=True)
        print(json.dumps({"ok": True, "result": {"outputs": [out], "first_ms": ms, "ms": ms}}), flush=True)
        continue
    if conf.get("fail_in") == "run":
        print(json.dumps({"ok": False, "error": "no luck", "status": "out-of-memory"}), flush=True)
        continue
    if conf.get("crash_in") == "run":
        os.kill(os.getpid(), signal.SIGSEGV)
    if conf.get("hang_in") == "run":
        time.sleep(3600)
    with open(conf["log"], "a") as f:
        f.write("%s %d\n" % (conf["name"], q["number"]))
    start = time.perf_counter()
    for _ in range(q["warm"] + q["number"]):
        time.sleep(ms / 1000.0)
    total = (time.perf_counter() - start) * 1000
    per = total / max(1, q["warm"] + q["number"])
    print(json.dumps({"ok": True, "ms": per * q["number"], "warm_ms": per * q["warm"]}), flush=True)
)py";

class BenchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() / ("kiln_bench_test_" + std::to_string(getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(m_dir);
    fs::create_directories(m_dir);
  }
  void TearDown() override { fs::remove_all(m_dir); }

  BenchBackend backend(const std::string& name, json setup) {
    setup["name"] = name;
    setup["log"] = (m_dir / "log.txt").string();
    if (!setup.contains("ms")) setup["ms"] = 1.0;
    return {name, {"python3", "-c", kWorker}, setup.dump(), ""};
  }
  BenchOptions options(int repeat, int processes = 1) {
    BenchOptions o;
    o.warmup = 1;
    o.repeat = repeat;
    o.minRepeatMs = 0;
    o.processes = processes;
    o.workDir = m_dir.string();
    o.runTimeoutSeconds = 20;
    return o;
  }
  std::vector<std::string> log() {
    std::ifstream in(m_dir / "log.txt");
    std::vector<std::string> names;
    for (std::string name, n; in >> name >> n;) names.push_back(name);
    return names;
  }

  fs::path m_dir;
};

TEST_F(BenchTest, RepeatsAlternateBetweenBackendsEachInItsOwnProcess) {
  BenchResult r = runSideBySide({backend("a", {{"ms", 2.0}}), backend("b", {{"ms", 6.0}})}, options(5));
  ASSERT_EQ(r.rows.size(), 2u);
  for (const BenchRow& row : r.rows) {
    ASSERT_TRUE(row.ok()) << row.name << ": " << row.reason;
    EXPECT_EQ(row.timing.samplesMs.size(), 5u);
    ASSERT_EQ(row.pids.size(), 1u);
    ASSERT_EQ(row.outputs.size(), 1u);
    std::ifstream out(row.outputs[0]);
    std::string written;
    out >> written;
    EXPECT_EQ(written, row.name);  // each row's outputs come from its own worker
  }
  EXPECT_NE(r.rows[0].pids[0], r.rows[1].pids[0]);
  EXPECT_NE(r.rows[0].pids[0], getpid());
  // Sleeping 2 ms and 6 ms per call (at least that; more on a busy machine).
  EXPECT_GE(r.rows[0].timing.minMs, 2.0);
  EXPECT_GE(r.rows[1].timing.minMs, 6.0);
  EXPECT_LT(r.rows[0].timing.medianMs, r.rows[1].timing.medianMs);
  // Warm-up (and the calibration, off here) first, then the timed repeats alternate a, b, a, b.
  std::vector<std::string> order = log();
  ASSERT_EQ(order.size(), 2u + 10u);
  for (size_t i = 2; i < order.size(); ++i) EXPECT_EQ(order[i], i % 2 == 0 ? "a" : "b") << "run " << i;
  // The host's placement probed before each of the 5 rounds and after the last.
  if (measureCoreRoundTrip(1)) {
    ASSERT_EQ(r.coreRoundTripNs.size(), 6u);
    for (double ns : r.coreRoundTripNs) EXPECT_GT(ns, 0);
  }
}

TEST(CoreLatency, ProbesTwoCpusAndNeedsTwo) {
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  if (CPU_COUNT(&allowed) < 2) GTEST_SKIP() << "this machine gives the test one CPU";
  auto probe = measureCoreRoundTrip(2);
  ASSERT_TRUE(probe);
  EXPECT_NE(probe->cpuA, probe->cpuB);
  EXPECT_TRUE(CPU_ISSET(probe->cpuA, &allowed) && CPU_ISSET(probe->cpuB, &allowed));
  // A cache line's round trip between two cores: tens to hundreds of ns, not zero, not a scheduler tick.
  EXPECT_GT(probe->ns, 1.0);
  EXPECT_LT(probe->ns, 100000.0);
  // A thread that may run on one CPU only has no second one to probe against.
  std::optional<CoreRoundTrip> one;
  std::thread confined([&] {
    cpu_set_t only;
    CPU_ZERO(&only);
    CPU_SET(probe->cpuA, &only);
    ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof only, &only), 0);
    one = measureCoreRoundTrip(2);
  });
  confined.join();
  EXPECT_FALSE(one);
}

TEST(CoreLatency, PlacementChangesWhenProbesDisagree) {
  EXPECT_FALSE(placementChanged({}));
  EXPECT_FALSE(placementChanged({70}));
  EXPECT_FALSE(placementChanged({70, 74, 71, 90}));
  EXPECT_TRUE(placementChanged({70, 72, 320, 318}));
  EXPECT_FALSE(placementChanged({0, 5}));  // no probe of 0 ns: not a ratio
}

TEST_F(BenchTest, ProcessesThatDisagreeAreFlagged) {
  json slowSecond = {{"ms_by_process", {2.0, 8.0}}, {"counter", (m_dir / "counter").string()}};
  BenchResult r = runSideBySide({backend("split", slowSecond), backend("even", {{"ms", 3.0}})}, options(6, 2));
  ASSERT_TRUE(r.rows[0].ok()) << r.rows[0].reason;
  ASSERT_TRUE(r.rows[1].ok()) << r.rows[1].reason;
  EXPECT_EQ(r.rows[0].pids.size(), 2u);
  EXPECT_EQ(r.rows[0].timing.samplesMs.size(), 6u);  // spread over the two processes
  ASSERT_EQ(r.rows[0].processMedianMs.size(), 2u);
  EXPECT_TRUE(r.rows[0].processesDisagree);
  // The same work in both processes agrees (within 10 %, a few ms of sleep on a quiet machine).
  ASSERT_EQ(r.rows[1].processMedianMs.size(), 2u);
  double lo = std::min(r.rows[1].processMedianMs[0], r.rows[1].processMedianMs[1]);
  double hi = std::max(r.rows[1].processMedianMs[0], r.rows[1].processMedianMs[1]);
  EXPECT_EQ(r.rows[1].processesDisagree, hi / lo > 1.10);
}

TEST_F(BenchTest, ACrashOrAHangFailsOnlyItsOwnRow) {
  BenchOptions o = options(3);
  o.runTimeoutSeconds = 2;
  auto start = std::chrono::steady_clock::now();
  BenchResult r = runSideBySide({backend("fine", {}), backend("crash-setup", {{"crash_in", "setup"}}),
                                 backend("crash-run", {{"crash_in", "run"}}), backend("hang", {{"hang_in", "run"}}),
                                 backend("oom", {{"fail_in", "run"}}), backend("also-fine", {})},
                                o);
  ASSERT_EQ(r.rows.size(), 6u);
  EXPECT_TRUE(r.rows[0].ok()) << r.rows[0].reason;
  EXPECT_TRUE(r.rows[5].ok()) << r.rows[5].reason;
  EXPECT_EQ(r.rows[0].timing.samplesMs.size(), 3u);
  EXPECT_EQ(r.rows[5].timing.samplesMs.size(), 3u);
  EXPECT_EQ(r.rows[1].status, Status::Failed);
  EXPECT_NE(r.rows[1].reason.find("crashed (signal 11)"), std::string::npos) << r.rows[1].reason;
  EXPECT_TRUE(r.rows[1].kernelFault);
  EXPECT_EQ(r.rows[2].status, Status::Failed);
  EXPECT_NE(r.rows[2].reason.find("crashed (signal 11)"), std::string::npos) << r.rows[2].reason;
  EXPECT_EQ(r.rows[3].status, Status::Timeout);
  EXPECT_NE(r.rows[3].reason.find("timed out after 2 s"), std::string::npos) << r.rows[3].reason;
  EXPECT_EQ(r.rows[4].status, Status::OutOfMemory);
  EXPECT_EQ(r.rows[4].reason, "no luck");
  EXPECT_FALSE(r.rows[4].kernelFault);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 60);
}

TEST_F(BenchTest, AnUnavailableBackendIsNotStartedAndCancelStopsEverything) {
  BenchBackend missing{"missing", {}, "{}", "not installed here"};
  BenchResult r = runSideBySide({missing, backend("fine", {})}, options(2));
  EXPECT_EQ(r.rows[0].status, Status::Unavailable);
  EXPECT_EQ(r.rows[0].reason, "not installed here");
  EXPECT_TRUE(r.rows[0].pids.empty());
  EXPECT_TRUE(r.rows[1].ok());

  BenchOptions o = options(1000);
  int polls = 0;
  o.cancelled = [&] { return ++polls > 50; };
  auto start = std::chrono::steady_clock::now();
  r = runSideBySide({backend("a", {{"ms", 5.0}}), backend("b", {{"ms", 5.0}})}, o);
  EXPECT_TRUE(r.cancelled);
  for (const BenchRow& row : r.rows) {
    EXPECT_EQ(row.status, Status::Skipped);
    for (int pid : row.pids) EXPECT_NE(kill(pid, 0), 0) << "worker " << pid << " left running";
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 30);
}

TEST(ProcessParked, ASleepingProcessIsParkedASpinningOneIsNot) {
  WorkerProcess sleeper, spinner;
  std::string why;
  ASSERT_TRUE(sleeper.start({"sleep", "30"}, why)) << why;
  ASSERT_TRUE(spinner.start({"sh", "-c", "while :; do :; done"}, why)) << why;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_TRUE(processParked(sleeper.pid()));
  // Runnable whether on a core or waiting for one: never parked while it spins.
  for (int i = 0; i < 20; ++i) EXPECT_FALSE(processParked(spinner.pid()));
  EXPECT_FALSE(processParked(999999999));  // no such process
}

}  // namespace
}  // namespace kiln::profiler
