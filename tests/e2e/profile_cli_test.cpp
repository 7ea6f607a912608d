// kiln profile | sweep | sessions | report | compare's store, run as a user would: real processes,
// a real session store in a temporary directory.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "tests/e2e/process.h"

namespace {

namespace fs = std::filesystem;

using kiln::testing_support::Outcome;

class ProfileCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::random_device rd;
    s_dir = fs::temp_directory_path() / ("kiln_profile_cli_" + std::to_string(rd()));
    fs::create_directories(s_dir);
  }
  static void TearDownTestSuite() { fs::remove_all(s_dir); }

  static std::string file(const std::string& name) { return (s_dir / name).string(); }
  static std::string db() { return file("kiln.db"); }
  static std::string model() { return std::string(KILN_MODELS_DIR) + "/ops/conv_bn_relu.pt"; }

  static Outcome kiln(const std::string& args) {
    return ::kiln::testing_support::runProcess(std::string(KILN_BINARY) + " " + args, file("stderr.txt"));
  }
  static std::string read(const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  static fs::path s_dir;
};

fs::path ProfileCli::s_dir;

TEST_F(ProfileCli, HelpForEveryMeasuringCommand) {
  for (const char* cmd : {"profile", "sweep", "sessions", "report", "compare"}) {
    Outcome o = kiln(std::string(cmd) + " --help");
    EXPECT_EQ(o.exitCode, 0) << cmd;
    EXPECT_NE(o.out.find("--db"), std::string::npos) << cmd << ": " << o.out;
  }
  for (const char* cmd : {"profile", "sweep", "compare"}) {
    Outcome o = kiln(std::string(cmd) + " --help");
    for (const char* flag : {"--target", "--opt-level", "--threads", "--json", "--no-store"})
      EXPECT_NE(o.out.find(flag), std::string::npos) << cmd << " lacks " << flag;
  }
}

TEST_F(ProfileCli, ProfileTwoBuildsThenShowDiffAndReport) {
  std::string common = " --repeat 3 --threads 2 --db " + db();
  Outcome o0 = kiln("profile " + model() + common + " -O0 --by op");
  ASSERT_EQ(o0.exitCode, 0) << o0.err;
  EXPECT_NE(o0.out.find("operator"), std::string::npos) << o0.out;
  Outcome o2 = kiln("profile " + model() + common + " -O2 --top 0 --trace " + file("trace.json") +
                    " --json " + file("profile.json"));
  ASSERT_EQ(o2.exitCode, 0) << o2.err;
  EXPECT_NE(o2.out.find("gap vs end-to-end"), std::string::npos) << o2.out;
  EXPECT_NE(o2.out.find("stored: session 1, run 2, build 2"), std::string::npos) << o2.out;

  nlohmann::json profile = nlohmann::json::parse(read(file("profile.json")));
  nlohmann::json trace = nlohmann::json::parse(read(file("trace.json")));
  size_t complete = 0;
  for (const auto& e : trace["traceEvents"]) complete += e["ph"] == "X";
  EXPECT_EQ(complete, profile["calls"].size());

  Outcome list = kiln("sessions list --db " + db());
  ASSERT_EQ(list.exitCode, 0) << list.err;
  EXPECT_NE(list.out.find("conv_bn_relu"), std::string::npos) << list.out;
  Outcome show = kiln("sessions show 1 --db " + db());
  ASSERT_EQ(show.exitCode, 0) << show.err;
  EXPECT_NE(show.out.find("builds"), std::string::npos);
  EXPECT_NE(show.out.find("profile"), std::string::npos);
  Outcome diff = kiln("sessions diff 1 2 --db " + db());
  ASSERT_EQ(diff.exitCode, 0) << diff.err;
  EXPECT_NE(diff.out.find("fused differently"), std::string::npos) << diff.out;
  EXPECT_EQ(diff.out.find("Roofline, A -> B"), std::string::npos) << diff.out;
  // Both builds on one roofline: the profiles were taken without ceilings, so the store's are
  // measured for the build's thread count; every call with FLOPs gets a line, the chart one grey
  // dot per call of A with FLOPs.
  Outcome roof = kiln("sessions diff 1 2 --roofline --svg " + file("moves.svg") + " --db " + db());
  ASSERT_EQ(roof.exitCode, 0) << roof.err;
  EXPECT_NE(roof.out.find("Roofline, A -> B (ceilings measured now"), std::string::npos) << roof.out;
  EXPECT_NE(roof.out.find("% of bound A -> B"), std::string::npos) << roof.out;
  EXPECT_NE(roof.out.find("wrote " + file("moves.svg")), std::string::npos) << roof.out;
  std::string svg = read(file("moves.svg"));
  EXPECT_NE(svg.find("class=\"previous\""), std::string::npos);
  EXPECT_NE(svg.find("class=\"call\""), std::string::npos);
  Outcome again = kiln("sessions diff 1 2 --roofline --db " + db());
  ASSERT_EQ(again.exitCode, 0) << again.err;
  EXPECT_NE(again.out.find("the store's ceilings"), std::string::npos) << again.out;  // measured once

  Outcome report = kiln("report 1 --html " + file("r.html") + " --csv " + file("r.csv") + " --db " + db());
  ASSERT_EQ(report.exitCode, 0) << report.err;
  EXPECT_NE(read(file("r.html")).find("<svg"), std::string::npos);
  EXPECT_EQ(read(file("r.csv")).rfind("session_id,run_id,run_kind,date,model,sha256,backend,batch,status", 0),
            0u);
}

TEST_F(ProfileCli, RooflinePerCallInTheJsonAndTheReport) {
  std::string rdb = file("roofline.db");
  Outcome measured = kiln("roofline --threads 2 --db " + rdb + " --json " + file("ceilings.json"));
  ASSERT_EQ(measured.exitCode, 0) << measured.err;
  EXPECT_NE(measured.out.find("ceilings measured now"), std::string::npos) << measured.out;
  EXPECT_NE(measured.out.find("DRAM"), std::string::npos) << measured.out;
  nlohmann::json ceilings = nlohmann::json::parse(read(file("ceilings.json")));
  EXPECT_EQ(ceilings["threads"], 2);
  EXPECT_FALSE(ceilings["reused"].get<bool>());
  Outcome reused = kiln("roofline --threads 2 --db " + rdb);
  ASSERT_EQ(reused.exitCode, 0) << reused.err;
  EXPECT_NE(reused.out.find("ceilings from the store"), std::string::npos) << reused.out;

  Outcome o = kiln("profile " + model() + " --repeat 3 --threads 2 --roofline --top 0 --db " + rdb + " --json " +
                   file("roofline.json"));
  ASSERT_EQ(o.exitCode, 0) << o.err;
  EXPECT_NE(o.out.find("roofline (2 threads)"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("from the store"), std::string::npos) << o.out;  // what kiln roofline measured
  nlohmann::json j = nlohmann::json::parse(read(file("roofline.json")));
  ASSERT_TRUE(j.contains("ceilings")) << j.dump();
  EXPECT_EQ(j["ceilings"]["id"], ceilings["id"]);
  EXPECT_EQ(j["context"]["ceilings_id"], ceilings["id"]);
  double peak = j["ceilings"]["peak_gflops"].get<double>();
  const nlohmann::json& levels = j["ceilings"]["bandwidth"];
  ASSERT_TRUE(j.contains("roofline")) << j.dump();
  const nlohmann::json& calls = j["calls"];
  const nlohmann::json& roof = j["roofline"];
  ASSERT_EQ(roof.size(), calls.size());
  ASSERT_GT(roof.size(), 0u);
  auto near = [](double a, double b) { return std::abs(a - b) <= 1e-9 + 1e-6 * std::max(std::abs(a), std::abs(b)); };
  for (size_t i = 0; i < roof.size(); ++i) {
    const nlohmann::json& r = roof[i];
    const nlohmann::json& c = calls[i];
    SCOPED_TRACE(r.dump());
    EXPECT_EQ(r["call"], c["index"]);
    EXPECT_EQ(r["key"], c["key"]);
    double flops = r["flops"].get<double>(), bytes = r["bytes"].get<double>(), us = r["time_us"].get<double>();
    EXPECT_EQ(flops, c["flops"].get<double>());
    EXPECT_EQ(bytes, c["bytes"].get<double>());
    ASSERT_GT(bytes, 0);
    ASSERT_GT(us, 0);
    EXPECT_TRUE(near(r["intensity"].get<double>(), flops / bytes));
    EXPECT_TRUE(near(r["gflops"].get<double>(), flops / (us * 1e3)));
    // The level: the first whose capacity holds the bytes, DRAM (capacity 0) when none does.
    std::string expected;
    double bandwidth = 0;
    for (const auto& l : levels) {
      double capacity = l["capacity_bytes"].get<double>();
      if (capacity == 0 || bytes <= capacity) {
        expected = l["level"].get<std::string>();
        bandwidth = l["gb_per_second"].get<double>();
        break;
      }
    }
    EXPECT_EQ(r["level"], expected);
    EXPECT_TRUE(near(r["bandwidth_gb_per_second"].get<double>(), bandwidth));
    double bound = r["bound_gflops"].get<double>();
    if (flops > 0) {
      EXPECT_TRUE(near(bound, std::min(peak, flops / bytes * bandwidth)));
      EXPECT_TRUE(near(r["percent_of_bound"].get<double>(), 100 * r["gflops"].get<double>() / bound));
      EXPECT_EQ(r["bound"], flops / bytes * bandwidth < peak ? "memory" : "compute");
    } else {
      EXPECT_EQ(bound, 0);
      EXPECT_EQ(r["bound"], "memory");
      EXPECT_TRUE(near(r["percent_of_bound"].get<double>(), 100 * bytes / (us * 1e3) / bandwidth));
    }
  }

  nlohmann::json stored = j["stored"];
  Outcome report = kiln("report " + std::to_string(stored["session"].get<int64_t>()) + " --html " +
                        file("roofline.html") + " --db " + rdb);
  ASSERT_EQ(report.exitCode, 0) << report.err;
  std::string html = read(file("roofline.html"));
  EXPECT_NE(html.find("<h2>Roofline</h2>"), std::string::npos);
  EXPECT_NE(html.find("class=\"chart roofline\""), std::string::npos);
  size_t withFlops = 0;
  for (const auto& c : calls) withFlops += c["flops"].get<double>() > 0;
  size_t dots = 0;
  for (size_t at = html.find("class=\"call\""); at != std::string::npos; at = html.find("class=\"call\"", at + 1)) ++dots;
  EXPECT_EQ(dots, withFlops);

  // Measured again on request: a new row, which the next profile refers to.
  Outcome again = kiln("roofline --threads 2 --measure --db " + rdb + " --json " + file("ceilings2.json"));
  ASSERT_EQ(again.exitCode, 0) << again.err;
  nlohmann::json newer = nlohmann::json::parse(read(file("ceilings2.json")));
  EXPECT_GT(newer["id"].get<int64_t>(), ceilings["id"].get<int64_t>());
  Outcome plain = kiln("profile " + model() + " --repeat 1 --threads 2 --db " + rdb + " --json " + file("plain.json"));
  ASSERT_EQ(plain.exitCode, 0) << plain.err;
  nlohmann::json pj = nlohmann::json::parse(read(file("plain.json")));
  EXPECT_EQ(pj["context"]["ceilings_id"], newer["id"]);  // referred to without --roofline
  EXPECT_FALSE(pj.contains("roofline"));
}

TEST_F(ProfileCli, SweepPrintsATablePerBackendAndStores) {
  Outcome o = kiln("sweep " + model() +
                   " --batches 1,2 --backends kiln,pytorch-eager --repeat 2 --threads 2 --json " +
                   file("sweep.json") + " --db " + file("sweep.db") + " --new-session");
  ASSERT_EQ(o.exitCode, 0) << o.err;
  EXPECT_NE(o.out.find("throughput (items/s)"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("pytorch-eager"), std::string::npos);
  nlohmann::json j = nlohmann::json::parse(read(file("sweep.json")));
  EXPECT_EQ(j["points"].size(), 4u);
  EXPECT_TRUE(j["context"].contains("llvm_version"));
  Outcome bad = kiln("sweep " + model() + " --backends kiln,tvm --no-store");
  EXPECT_EQ(bad.exitCode, 2);
  EXPECT_NE(bad.err.find("unknown backend 'tvm'"), std::string::npos) << bad.err;
}

TEST_F(ProfileCli, StoreErrorsAreOneClearLine) {
  std::ofstream(file("notes.txt")) << "not a database, just notes\n";
  Outcome o = kiln("profile " + model() + " --repeat 1 --db " + file("notes.txt"));
  EXPECT_EQ(o.exitCode, 10) << o.err;  // ErrorKind::Store
  EXPECT_NE(o.err.find("error: "), std::string::npos);
  EXPECT_NE(o.err.find("not a SQLite database"), std::string::npos) << o.err;
  EXPECT_EQ(read(file("notes.txt")), "not a database, just notes\n");
  Outcome missing = kiln("sessions show 1 --db " + file("nowhere.db"));
  EXPECT_EQ(missing.exitCode, 6);
  EXPECT_NE(missing.err.find("no session store yet"), std::string::npos) << missing.err;
  Outcome nothing = kiln("report 1 --db " + db());
  EXPECT_EQ(nothing.exitCode, 2);
}

}  // namespace
