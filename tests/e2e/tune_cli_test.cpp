// kiln tune end to end, with small budgets: real worker processes measuring real JIT-compiled
// candidates, records on disk and in a real SQLite store, resumption, candidates that crash or
// hang, and builds that apply the best records. No timing thresholds: only what was recorded.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "runtime/npy.h"
#include "tests/e2e/process.h"

namespace {

namespace fs = std::filesystem;
using kiln::testing_support::Outcome;
using kiln::testing_support::kSanitized;

/// This test process's scratch folder, emptied on first use: the pid in its name comes round again
/// (pid_max is 32768 on the CI machines), and a store an earlier process of that pid left there
/// holds this run's measurements already, so a tune would write no search records.
fs::path tempDir() {
  static const fs::path d = [] {
    fs::path fresh = fs::temp_directory_path() / ("kiln_tune_test_" + std::to_string(::getpid()));
    fs::remove_all(fresh);
    return fresh;
  }();
  fs::create_directories(d);
  return d;
}

Outcome kiln(const std::string& args, const std::string& env = "") {
  return kiln::testing_support::runProcess(env + " " + std::string(KILN_BINARY) + " " + args,
                                           (tempDir() / "stderr.txt").string());
}

std::string model() { return std::string(KILN_MODELS_DIR) + "/ops/conv_bn_relu.pt"; }

std::vector<nlohmann::json> readLines(const fs::path& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

bool isConfirmation(const nlohmann::json& r) { return r["tuner"] == "confirm"; }

/// The records of the search (one per measured candidate), without confirmation rounds.
std::vector<nlohmann::json> searchLines(const fs::path& path) {
  std::vector<nlohmann::json> out = readLines(path);
  std::erase_if(out, isConfirmation);
  return out;
}

/// The records of each confirmation round, by the round's timestamp.
std::map<std::string, std::vector<nlohmann::json>> rounds(const fs::path& path) {
  std::map<std::string, std::vector<nlohmann::json>> out;
  for (const auto& r : readLines(path))
    if (isConfirmation(r)) out[r["timestamp"].get<std::string>()].push_back(r);
  return out;
}

/// The knobs a build takes from one confirmation round: its fastest record, unless the record
/// flagged as the default is within 3 % of it (records.h kDefaultMargin).
std::string chosenKnobs(const std::vector<nlohmann::json>& records) {
  auto best = *std::min_element(records.begin(), records.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
    return a["cost_ms"].get<double>() < b["cost_ms"].get<double>();
  });
  for (const auto& r : records)
    if (r.value("default", false) && best["cost_ms"].get<double>() * 1.03 > r["cost_ms"].get<double>())
      return r["knobs"].get<std::string>();
  return best["knobs"].get<std::string>();
}

/// Each test has its own store: records in a store count as measured for every later run.
std::string common(const std::string& part = "") {
  std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  return " --no-compare --threads 1 --db " + (tempDir() / (test + part + ".db")).string();
}

TEST(TuneCli, RecordsAreWrittenResumedAndApplied) {
  fs::path records = tempDir() / "resume.jsonl";
  fs::remove(records);
  Outcome first = kiln("tune " + model() + " --tasks conv2d_nchwc --tuner random --trials 3 --records " +
                       records.string() + common());
  ASSERT_EQ(first.exitCode, 0) << first.err;
  std::vector<nlohmann::json> lines = searchLines(records);
  ASSERT_EQ(lines.size(), 3u);
  for (const auto& r : lines) {
    EXPECT_EQ(r["error"], "") << r.dump();
    EXPECT_GT(r["cost_ms"].get<double>(), 0);
    EXPECT_NE(r["key"].get<std::string>().find("conv2d_nchwc:"), std::string::npos);
    EXPECT_NE(r["target"].get<std::string>().find("-mcpu="), std::string::npos);
  }
  // The heuristic's own configuration is measured first: it is the baseline.
  EXPECT_NE(first.out.find("3 measured"), std::string::npos) << first.out;
  // Then the three, all finalists, were timed again side by side: one round, one timestamp.
  auto confirmed = rounds(records);
  ASSERT_EQ(confirmed.size(), 1u);
  std::set<std::string> finalists;
  for (const auto& r : confirmed.begin()->second) {
    EXPECT_EQ(r["error"], "") << r.dump();
    EXPECT_GT(r["cost_ms"].get<double>(), 0);
    finalists.insert(r["knobs"].get<std::string>());
  }
  std::set<std::string> searched;
  for (const auto& r : lines) searched.insert(r["knobs"].get<std::string>());
  EXPECT_EQ(finalists, searched);

  // Resuming with the same budget measures nothing; a larger one measures only the difference,
  // never a configuration already in the records.
  Outcome again = kiln("tune " + model() + " --tasks conv2d_nchwc --tuner random --trials 3 --records " +
                       records.string() + common());
  ASSERT_EQ(again.exitCode, 0) << again.err;
  EXPECT_NE(again.out.find("0 measured"), std::string::npos) << again.out;
  EXPECT_EQ(rounds(records).size(), 1u) << "nothing new was measured: no new round";
  Outcome more = kiln("tune " + model() + " --tasks conv2d_nchwc --tuner xgb --trials 5 --records " +
                      records.string() + common());
  ASSERT_EQ(more.exitCode, 0) << more.err;
  lines = searchLines(records);
  ASSERT_EQ(lines.size(), 5u);
  std::set<std::string> knobs;
  for (const auto& r : lines) knobs.insert(r["knobs"].get<std::string>());
  EXPECT_EQ(knobs.size(), 5u);
  // New candidates were measured: a second round timed the best three and the default.
  confirmed = rounds(records);
  ASSERT_EQ(confirmed.size(), 2u);
  const std::vector<nlohmann::json>& latest = confirmed.rbegin()->second;
  EXPECT_GE(latest.size(), 3u);
  EXPECT_LE(latest.size(), 4u);

  // The store keeps them too, and the build with --records uses the latest round's choice.
  std::string best = chosenKnobs(latest);
  Outcome ir = kiln("ir " + model() + " --stage lowered --records " + records.string());
  ASSERT_EQ(ir.exitCode, 0) << ir.err;
  EXPECT_NE(ir.out.find("// schedule: " + best), std::string::npos) << best << "\n" << ir.out.substr(0, 800);

  // The session store kept the same records: building from it picks the same schedule.
  std::string db = common().substr(common().find("--db ") + 5);
  Outcome fromStore = kiln("ir " + model() + " --stage lowered --records " + db);
  ASSERT_EQ(fromStore.exitCode, 0) << fromStore.err;
  EXPECT_NE(fromStore.out.find("// schedule: " + best), std::string::npos);

  // compare with records times the untuned build beside the tuned one.
  std::string json = (tempDir() / "compare.json").string();
  Outcome cmp = kiln("compare " + model() + " --records " + records.string() + " --no-store --threads 1 --json " + json);
  ASSERT_EQ(cmp.exitCode, 0) << cmp.err;
  std::ifstream cj(json);
  nlohmann::json compared = nlohmann::json::parse(cj);
  std::set<std::string> backends;
  for (const auto& b : compared["backends"]) backends.insert(b["backend"].get<std::string>());
  EXPECT_TRUE(backends.count("kiln-untuned") && backends.count("kiln")) << compared.dump();

  // Outputs with the tuned schedule equal the untuned ones.
  kiln::runtime::Tensor x = kiln::runtime::Tensor::zeros(kiln::runtime::DType::Float32, {1, 8, 16, 16});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(i % 17) / 8.0f - 1.0f;
  std::string in = (tempDir() / "x.npy").string(), a = (tempDir() / "a.npy").string(), b = (tempDir() / "b.npy").string();
  kiln::runtime::writeNpy(in, x);
  ASSERT_EQ(kiln("run " + model() + " --input " + in + " --output " + a).exitCode, 0);
  ASSERT_EQ(kiln("run " + model() + " --input " + in + " --output " + b + " --records " + records.string()).exitCode, 0);
  kiln::runtime::Tensor ya = kiln::runtime::readNpy(a), yb = kiln::runtime::readNpy(b);
  ASSERT_EQ(ya.numel(), yb.numel());
  for (int64_t i = 0; i < ya.numel(); ++i) ASSERT_NEAR(ya.data<float>()[i], yb.data<float>()[i], 1e-4);
}

TEST(TuneCli, ARerunIntoANewRecordsFileLeavesTheRecordsItsBuildUses) {
  // A first run keeps its records in the store only; a rerun with --records finds everything
  // measured and must still leave a file that builds as the store does.
  Outcome first = kiln("tune " + model() + " --tasks conv2d_nchwc --tuner random --trials 3" + common());
  ASSERT_EQ(first.exitCode, 0) << first.err;
  fs::path records = tempDir() / "new.jsonl";
  fs::remove(records);
  Outcome again = kiln("tune " + model() + " --tasks conv2d_nchwc --tuner random --trials 3 --records " +
                       records.string() + common());
  ASSERT_EQ(again.exitCode, 0) << again.err;
  EXPECT_NE(again.out.find("0 measured"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("records: 0 written, "), std::string::npos) << again.out;
  EXPECT_NE(again.out.find(" copied from earlier runs in the session store to " + records.string()),
            std::string::npos)
      << again.out;
  ASSERT_TRUE(fs::exists(records));
  auto confirmed = rounds(records);
  ASSERT_EQ(confirmed.size(), 1u) << "the round that decides the build was copied whole";
  std::string best = chosenKnobs(confirmed.begin()->second);
  // The summary names the schedule the build will use.
  EXPECT_NE(again.out.find(best), std::string::npos) << best << "\n" << again.out;

  std::string db = common().substr(common().find("--db ") + 5);
  Outcome fromFile = kiln("ir " + model() + " --stage lowered --records " + records.string());
  Outcome fromStore = kiln("ir " + model() + " --stage lowered --records " + db);
  ASSERT_EQ(fromFile.exitCode, 0) << fromFile.err;
  ASSERT_EQ(fromStore.exitCode, 0) << fromStore.err;
  EXPECT_NE(fromFile.out.find("// schedule: " + best), std::string::npos) << fromFile.out.substr(0, 800);
  EXPECT_EQ(fromFile.out, fromStore.out);

  // A third run finds the file complete: nothing is copied twice.
  size_t lines = readLines(records).size();
  Outcome third = kiln("tune " + model() + " --tasks conv2d_nchwc --tuner random --trials 3 --records " +
                       records.string() + common());
  ASSERT_EQ(third.exitCode, 0) << third.err;
  EXPECT_NE(third.out.find("records: 0 written to "), std::string::npos) << third.out;
  EXPECT_EQ(readLines(records).size(), lines);
}

// The summary counts the calls that run a schedule of primitives after the run: with only
// ResNet-18's classifier tuned (dense's dot-product sketch), every convolution still runs its
// sketch's default (direct and Winograd ones alike), so every keyed call counts.
TEST(TuneCli, TheSummaryCountsUntunedSketchKernels) {
  std::string json = (tempDir() / "sketch_calls.json").string();
  Outcome run = kiln("tune " + std::string(KILN_MODELS_DIR) + "/resnet18.pt --tasks dense_0 --trials 2" +
                     " --confirm 0 --no-store --json " + json + common());
  ASSERT_EQ(run.exitCode, 0) << run.err;
  std::ifstream in(json);
  nlohmann::json r = nlohmann::json::parse(in);
  ASSERT_EQ(r["tasks"].size(), 1u);
  EXPECT_EQ(r["tasks"][0]["weight"], 1);
  EXPECT_GT(r["tunable_calls"].get<int>(), 10);
  EXPECT_EQ(r["searched_calls"].get<int>(), r["tunable_calls"].get<int>()) << r.dump();
  EXPECT_NE(run.out.find(std::to_string(r["searched_calls"].get<int>()) + " run a schedule of primitives"),
            std::string::npos)
      << run.out;
}

TEST(TuneCli, CrashingAndHangingCandidatesAreRecordedAndTuningGoesOn) {
  fs::path records = tempDir() / "faults.jsonl";
  fs::remove(records);
  // Grid order measures the default at its three granularities, then tiles of mi=1: those crash
  // their worker; below, the default at 16 chunks per thread hangs.
  Outcome o = kiln("tune " + model() + " --tasks conv2d_nchwc --tuner grid --trials 6 --timeout " +
                       std::to_string(kSanitized ? 12 : 3) + " --records " + records.string() + common(),
                   "KILN_TUNE_FAULT=crash:mi=1,");
  ASSERT_EQ(o.exitCode, 0) << o.err;
  EXPECT_FALSE(o.signaled);
  std::vector<nlohmann::json> lines = searchLines(records);
  ASSERT_EQ(lines.size(), 6u);
  // Exactly the configurations the fault matches crashed (how many of the first six grid points
  // have mi=1 depends on the tile the default takes), and every other one was measured.
  int crashed = 0, fine = 0, matching = 0;
  for (const auto& r : lines) {
    std::string error = r["error"];
    bool matches = (r["knobs"].get<std::string>() + ",").find("mi=1,") != std::string::npos;
    matching += matches;
    if (error.find("crashed (signal 11)") != std::string::npos) {
      ++crashed;
      EXPECT_TRUE(matches) << r.dump();
    }
    fine += error.empty();
  }
  EXPECT_GE(matching, 1);
  EXPECT_EQ(crashed, matching);
  EXPECT_EQ(fine, 6 - matching);

  fs::path hung = tempDir() / "hang.jsonl";
  fs::remove(hung);
  // A measurement's deadline must hold a healthy candidate's repeats: under AddressSanitizer one
  // took over 2 s on a loaded CI machine and was (rightly) recorded as a timeout.
  o = kiln("tune " + model() + " --tasks conv2d_nchwc --tuner grid --trials 4 --timeout " +
               std::to_string(kSanitized ? 12 : 2) + " --records " + hung.string() + common("hang"),
           "KILN_TUNE_FAULT=hang:par_chunks=16,");
  ASSERT_EQ(o.exitCode, 0) << o.err;
  lines = searchLines(hung);
  ASSERT_EQ(lines.size(), 4u);
  int timeouts = 0, hanging = 0;
  for (const auto& r : lines) {
    bool matches = (r["knobs"].get<std::string>() + ",").find("par_chunks=16,") != std::string::npos;
    bool timedOut = r["error"].get<std::string>().rfind("timeout", 0) == 0;
    hanging += matches;
    timeouts += timedOut;
    if (timedOut) {
      EXPECT_TRUE(matches) << r.dump();
    }
  }
  EXPECT_GE(hanging, 1);
  EXPECT_EQ(timeouts, hanging);
}

TEST(TuneCli, BadRecordLinesAreSkippedAndCounted) {
  fs::path records = tempDir() / "bad.jsonl";
  fs::remove(records);
  Outcome o = kiln("tune " + model() + " --tasks conv2d_nchwc --trials 2 --confirm 0 --records " +
                   records.string() + common());
  ASSERT_EQ(o.exitCode, 0) << o.err;
  {
    std::ofstream out(records, std::ios::app);
    out << "garbage\n{\"key\":1}\n";
  }
  o = kiln("tune " + model() + " --tasks conv2d_nchwc --trials 3 --confirm 0 --records " + records.string() +
           common("more"));
  ASSERT_EQ(o.exitCode, 0) << o.err;
  EXPECT_NE(o.err.find("skipped 2 bad line(s)"), std::string::npos) << o.err;
  // The good records are kept (not measured again), the bad lines stay, one new record follows.
  std::ifstream in(records);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 5) << text;

  // A file with no record at all is not a records file: refused, left as it was.
  fs::path garbage = tempDir() / "garbage.jsonl";
  {
    std::ofstream out(garbage);
    out << "garbage\n{\"key\":1}\n";
  }
  o = kiln("tune " + model() + " --tasks conv2d_nchwc --trials 2 --records " + garbage.string() +
           common("garbage"));
  EXPECT_EQ(o.exitCode, 5) << o.err;
  EXPECT_NE(o.err.find("not a tuning-records file"), std::string::npos) << o.err;
  EXPECT_EQ(fs::file_size(garbage), 18u);
}

// Template-free search for matmul (core/lower/gemm_search.h): the attention matmul of the BERT
// sample is a task; its sketch candidates' records carry the schedule trace, a build from such a
// record alone replays it (kiln ir shows it) and matches PyTorch eager, and a record whose trace
// does not replay stops the build with one line naming the key.
/// `kiln compare` of `model` built with `records` against PyTorch eager: within 1e-3.
void expectKilnMatchesEager(const std::string& model, const fs::path& records) {
  std::string json = (tempDir() / (records.stem().string() + "_compare.json")).string();
  Outcome cmp = kiln("compare " + model + " --backends pytorch-eager,kiln --repeat 2 --records " + records.string() +
                     " --no-store --threads 1 --json " + json);
  ASSERT_EQ(cmp.exitCode, 0) << cmp.err;
  std::ifstream in(json);
  nlohmann::json compared = nlohmann::json::parse(in);
  int checked = 0;
  for (const auto& b : compared["backends"]) {
    if (b["backend"] != "kiln") continue;
    ASSERT_TRUE(b["max_abs_diff_vs_eager"].is_number()) << b.dump();
    EXPECT_LE(b["max_abs_diff_vs_eager"].get<double>(), 1e-3) << b.dump();
    ++checked;
  }
  EXPECT_EQ(checked, 1) << compared.dump();
}

// Element nests are tasks like any kernel: --tasks nest takes every one of the model's (here the
// layout transforms at its edges), each candidate is a nest record, and the build with them
// matches PyTorch. A nest's key names it too: its commas inside brackets separate nothing.
TEST(TuneCli, ElementNestsAreTasksToo) {
  fs::path records = tempDir() / "nests.jsonl";
  fs::remove(records);
  Outcome o = kiln("tune " + model() + " --tasks nest --tuner random --trials 3 --confirm 0 --records " +
                   records.string() + common());
  ASSERT_EQ(o.exitCode, 0) << o.err;
  std::vector<nlohmann::json> lines = readLines(records);
  ASSERT_EQ(lines.size(), 6u) << o.out;  // two nests, three candidates each
  std::set<std::string> keys;
  for (const auto& r : lines) {
    EXPECT_EQ(r["error"], "") << r.dump();
    EXPECT_EQ(r["key"].get<std::string>().rfind("nest:fused[layout_transform", 0), 0u) << r.dump();
    EXPECT_NE(r.value("trace", ""), "") << r.dump();  // the sketch's steps for these knobs
    keys.insert(r["key"].get<std::string>());
  }
  ASSERT_EQ(keys.size(), 2u);
  Outcome list = kiln("tune " + model() + " --list-tasks --tasks '" + *keys.begin() + "'" + common("list"));
  ASSERT_EQ(list.exitCode, 0) << list.err;
  EXPECT_NE(list.out.find(*keys.begin()), std::string::npos) << list.out;
  EXPECT_EQ(list.out.find(*keys.rbegin()), std::string::npos) << list.out;
  EXPECT_EQ(list.out.find("conv2d_nchwc:"), std::string::npos) << list.out;
  expectKilnMatchesEager(model(), records);
}

// Reductions and softmax are tasks too (row nests): --tasks reduce takes BERT's layer-norm means
// and its softmax, each candidate a reduce record, and the build with them matches PyTorch.
TEST(TuneCli, ReductionsAreTasksToo) {
  std::string bert = std::string(KILN_MODELS_DIR) + "/bert_encoder.pt";
  fs::path records = tempDir() / "reductions.jsonl";
  fs::remove(records);
  Outcome o = kiln("tune " + bert + " --tasks reduce --tuner random --trials 3 --confirm 0 --records " +
                   records.string() + common());
  ASSERT_EQ(o.exitCode, 0) << o.err;
  std::set<std::string> keys;
  for (const auto& r : readLines(records)) {
    EXPECT_EQ(r["error"], "") << r.dump();
    EXPECT_EQ(r["key"].get<std::string>().rfind("reduce:fused[", 0), 0u) << r.dump();
    EXPECT_NE(r.value("trace", ""), "") << r.dump();
    keys.insert(r["key"].get<std::string>());
  }
  bool softmax = false, mean = false;
  for (const std::string& k : keys) {
    softmax = softmax || k.find("softmax{") != std::string::npos;
    mean = mean || k.find("mean{") != std::string::npos;
  }
  EXPECT_TRUE(softmax && mean) << o.out;
  // Kernels of about a microsecond print in us with three significant digits, not as 0.0011ms.
  EXPECT_TRUE(std::regex_search(o.out, std::regex(R"( [0-9]\.[0-9]{2}us )"))) << o.out;
  EXPECT_FALSE(std::regex_search(o.out, std::regex(R"(0\.00[0-9]{2}ms)"))) << o.out;
  expectKilnMatchesEager(bert, records);
}

// Every kernel of BERT has a tuning key: the embedding lookup fused with its adds (a gather by
// int64 token ids) and the padding mask (a comparison of the ids, cast and scaled) are nests like
// any other. Their candidates run on ids inside the embedding table, and the build with their
// records matches PyTorch.
TEST(TuneCli, GathersAndMasksAreTasksToo) {
  std::string bert = std::string(KILN_MODELS_DIR) + "/bert_encoder.pt";
  fs::path records = tempDir() / "gathers.jsonl";
  fs::remove(records);
  Outcome o =
      kiln("tune " + bert + " --tasks fused_take_add_add_0,fused_equal_cast_reshape_mul_0 --tuner random " +
           "--trials 3 --confirm 0 --records " + records.string() + common());
  ASSERT_EQ(o.exitCode, 0) << o.err;
  std::smatch keyed;
  ASSERT_TRUE(std::regex_search(
      o.out, keyed, std::regex(R"(kernels: (\d+) of (\d+) calls per inference have a tuning key)")))
      << o.out;
  EXPECT_EQ(keyed[1], keyed[2]) << o.out;
  bool take = false, mask = false;
  for (const auto& r : readLines(records)) {
    EXPECT_EQ(r["error"], "") << r.dump();
    EXPECT_NE(r.value("trace", ""), "") << r.dump();
    const std::string key = r["key"].get<std::string>();
    take = take || key.rfind("nest:fused[take{axis=0}(", 0) == 0;
    mask = mask || key.rfind("nest:fused[equal(", 0) == 0;
  }
  EXPECT_TRUE(take && mask) << o.out;
  expectKilnMatchesEager(bert, records);
}

TEST(TuneCli, MatmulRecordsCarryTracesThatBuildAndMatchPyTorch) {
  std::string bert = std::string(KILN_MODELS_DIR) + "/bert_encoder.pt";
  fs::path records = tempDir() / "matmul.jsonl";
  fs::remove(records);
  Outcome o = kiln("tune " + bert + " --tasks matmul_0 --tuner random --trials 3 --confirm 0 --records " +
                   records.string() + common());
  ASSERT_EQ(o.exitCode, 0) << o.err;
  std::vector<nlohmann::json> lines = readLines(records);
  ASSERT_EQ(lines.size(), 3u);
  nlohmann::json traced;
  for (const auto& r : lines) {
    EXPECT_EQ(r["key"].get<std::string>().rfind("matmul:", 0), 0u) << r.dump();
    EXPECT_EQ(r["error"], "") << r.dump();
    // Every candidate, the default first, is an annotation of the sketch and carries its trace.
    EXPECT_NE(r["knobs"].get<std::string>().find("mi="), std::string::npos) << r.dump();
    EXPECT_TRUE(r.contains("trace")) << r.dump();
    traced = r;
  }
  ASSERT_FALSE(traced.is_null());
  fs::path one = tempDir() / "matmul_one.jsonl";
  {
    std::ofstream out(one);
    out << traced.dump() << "\n";
  }
  std::string trace = traced["trace"].get<std::string>();
  Outcome ir = kiln("ir " + bert + " --stage lowered --records " + one.string());
  ASSERT_EQ(ir.exitCode, 0) << ir.err;
  EXPECT_NE(ir.out.find("// schedule: " + traced["knobs"].get<std::string>()), std::string::npos);
  EXPECT_NE(ir.out.find("// trace: " + trace.substr(0, trace.find('\n'))), std::string::npos) << trace;

  expectKilnMatchesEager(bert, one);

  traced["trace"] = "split(nope; 4, 1)\n";
  {
    std::ofstream out(one);
    out << traced.dump() << "\n";
  }
  ir = kiln("ir " + bert + " --stage lowered --records " + one.string());
  EXPECT_EQ(ir.exitCode, 5) << ir.err;
  EXPECT_EQ(std::count(ir.err.begin(), ir.err.end(), '\n'), 1) << ir.err;
  EXPECT_NE(ir.err.find("error: "), std::string::npos) << ir.err;
  EXPECT_NE(ir.err.find(traced["key"].get<std::string>() + "': its trace does not replay"), std::string::npos) << ir.err;
}

// A pointwise convolution's task named by its tuning key (commas and all) times the sketch's
// default (conv_search.h) and another annotation; a record of a sketch annotation makes
// the build pack the weights for its oc_vecs and run the sketch's kernel, which matches PyTorch
// on the whole network.
TEST(TuneCli, PointwiseConvSketchRecordsBuildAndMatchPyTorch) {
  std::string net = std::string(KILN_MODELS_DIR) + "/mobilenet_v2.pt";
  Outcome list = kiln("tune " + net + " --list-tasks");
  ASSERT_EQ(list.exitCode, 0) << list.err;
  std::string key;
  std::istringstream lines(list.out);
  for (std::string line; std::getline(lines, line) && key.empty();) {
    size_t at = line.find("conv2d_nchwc:");
    if (at != std::string::npos && line.find("kh=1,kw=1,sh=1,sw=1,ph=0,pw=0") != std::string::npos &&
        line.find(",g=1:") != std::string::npos)
      key = line.substr(at);
  }
  ASSERT_FALSE(key.empty()) << list.out;
  fs::path records = tempDir() / "pointwise.jsonl";
  fs::remove(records);
  Outcome o = kiln("tune " + net + " --tasks " + key + " --tuner random --trials 2 --confirm 0 --records " +
                   records.string() + common());
  ASSERT_EQ(o.exitCode, 0) << o.err;
  std::vector<nlohmann::json> tuned = readLines(records);
  ASSERT_EQ(tuned.size(), 2u);
  // The sketch's default first, then another of its annotations: each record carries its trace.
  for (const auto& r : tuned) {
    EXPECT_EQ(r["key"], key) << r.dump();
    EXPECT_EQ(r["error"], "") << r.dump();
    EXPECT_NE(r["knobs"].get<std::string>().find("mi="), std::string::npos) << r.dump();
    EXPECT_TRUE(r.contains("trace")) << r.dump();
  }

  nlohmann::json sketch = tuned[0];
  sketch["knobs"] = "mi=4,oc_vecs=1,po=1";
  sketch.erase("trace");
  fs::path one = tempDir() / "pointwise_one.jsonl";
  {
    std::ofstream out(one);
    out << sketch.dump() << "\n";
  }
  Outcome ir = kiln("ir " + net + " --stage lowered --records " + one.string());
  ASSERT_EQ(ir.exitCode, 0) << ir.err;
  EXPECT_NE(ir.out.find("// schedule: mi=4,oc_vecs=1,po=1"), std::string::npos);
  EXPECT_NE(ir.out.find("// trace: reorder(g, p, v)"), std::string::npos);
  expectKilnMatchesEager(net, one);
}

// The xgb tuner on loop-nest features, end to end: after its random first batch the model (trained
// on each measured candidate's compiled loop nest) and the evolutionary search propose the rest;
// every trial is a distinct, error-free record and the build with them matches PyTorch.
TEST(TuneCli, LoopFeatureTunerMeasuresDistinctCandidates) {
  fs::path records = tempDir() / "loops.jsonl";
  fs::remove(records);
  Outcome o = kiln("tune " + model() +
                   " --tasks conv2d_nchwc --features loops --trials 14 --batch-size 5 --records " +
                   records.string() + common());
  ASSERT_EQ(o.exitCode, 0) << o.err;
  std::vector<nlohmann::json> searched = searchLines(records);
  ASSERT_EQ(searched.size(), 14u);
  std::set<std::string> knobs;
  for (const auto& r : searched) {
    EXPECT_EQ(r["error"], "") << r.dump();
    EXPECT_TRUE(knobs.insert(r["knobs"].get<std::string>()).second) << "measured twice: " << r.dump();
  }
  expectKilnMatchesEager(model(), records);
}

// --cache-flush times every candidate with its weights and output flushed from the caches: the
// candidates are measured and correct as without it, and the run says how it timed them.
TEST(TuneCli, CacheFlushTimesCandidatesColdAndSaysSo) {
  for (bool flush : {true, false}) {
    std::string name = flush ? "flush" : "warm";
    fs::path records = tempDir() / (name + ".jsonl"), json = tempDir() / (name + ".json");
    fs::remove(records);
    Outcome o = kiln("tune " + model() + " --tasks conv2d_nchwc" + (flush ? " --cache-flush" : "") +
                     " --trials 3 --records " + records.string() + " --json " + json.string() + common(name));
    ASSERT_EQ(o.exitCode, 0) << o.err;
    std::vector<nlohmann::json> lines = readLines(records);
    EXPECT_GE(lines.size(), 3u);
    for (const auto& r : lines) {
      EXPECT_EQ(r["error"], "") << r.dump();
      EXPECT_GT(r["cost_ms"].get<double>(), 0) << r.dump();
    }
    std::ifstream in(json);
    nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    EXPECT_EQ(j["cache_flush"], flush) << j.dump();
    EXPECT_EQ(o.out.find("flushed from the caches") != std::string::npos, flush) << o.out;
  }
}

TEST(TuneCli, BadArgumentsGiveOneLineErrors) {
  Outcome o = kiln("tune " + model() + " --tuner annealing" + common());
  EXPECT_NE(o.exitCode, 0);
  EXPECT_FALSE(o.signaled);
  o = kiln("tune " + model() + " --features ansor" + common());
  EXPECT_NE(o.exitCode, 0);
  EXPECT_FALSE(o.signaled);
  EXPECT_NE(o.err.find("features"), std::string::npos) << o.err;
  o = kiln("tune /nonexistent.pt" + common());
  EXPECT_NE(o.exitCode, 0);
  EXPECT_NE(o.err.find("error: "), std::string::npos) << o.err;
  o = kiln("ir " + model() + " --stage lowered --records /nonexistent/records.jsonl");
  EXPECT_NE(o.exitCode, 0);
  EXPECT_NE(o.err.find("records"), std::string::npos) << o.err;
  // A tuning run appends JSON lines: it refuses a session store as its records file.
  o = kiln("tune " + model() + " --records " + (tempDir() / "x.db").string() + common());
  EXPECT_EQ(o.exitCode, 2) << o.err;
  EXPECT_NE(o.err.find("JSON-lines"), std::string::npos) << o.err;
  o = kiln("tune " + model() + " --list-tasks");
  ASSERT_EQ(o.exitCode, 0) << o.err;
  EXPECT_NE(o.out.find("conv2d_nchwc:n=1,c=8"), std::string::npos) << o.out;
  // --winograd 0 leaves the Winograd candidates out of the space: fewer points to search.
  Outcome direct = kiln("tune " + model() + " --list-tasks --winograd 0");
  ASSERT_EQ(direct.exitCode, 0) << direct.err;
  auto spaceOf = [](const std::string& listing) {
    std::istringstream lines(listing);
    std::string line, kernel, op;
    std::getline(lines, line);  // the header
    int64_t index = 0, calls = 0, space = 0;
    double mflop = 0;
    lines >> index >> kernel >> op >> calls >> mflop >> space;
    return space;
  };
  EXPECT_GT(spaceOf(o.out), 0) << o.out;
  EXPECT_LT(spaceOf(direct.out), spaceOf(o.out)) << direct.out;
}

}  // namespace
