// A user's own model, as a PyTorch user has it (issue 17, items 1 and 2): a module traced and
// saved by the user, which records no input shapes (given with --input-shapes), and a Python
// model reference (`file.py:build`) that Kiln traces itself. Real processes: the `kiln` binary,
// Debian's torch 1.13 writing the user's file and computing its outputs, and Kiln's Python
// environment (today's torch) tracing the references. Outputs are checked against torch's.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "app/facade.h"
#include "runtime/npy.h"
#include "tests/e2e/process.h"

namespace {

namespace fs = std::filesystem;
using kiln::testing_support::Outcome;
using kiln::runtime::Tensor;

const std::string& dir() {
  static const std::string d = [] {
    fs::path p = fs::temp_directory_path() / ("kiln_user_model_test_" + std::to_string(::getpid()));
    fs::create_directories(p);
    return p.string();
  }();
  return d;
}
std::string at(const std::string& name) { return dir() + "/" + name; }

/// Runs a command with the test's own cache and data folders (traced references, the store).
Outcome run(const std::string& command) {
  std::string env = "XDG_CACHE_HOME=" + at("cache") + " XDG_DATA_HOME=" + at("data") + " ";
  return kiln::testing_support::runProcess("cd " + dir() + " && " + env + command + " </dev/null", at("stderr.txt"));
}
Outcome kiln(const std::string& args) { return run(std::string(KILN_BINARY) + " " + args); }

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

void expectOneLineError(const Outcome& o, int code, const std::vector<std::string>& needles) {
  EXPECT_FALSE(o.signaled) << o.err;
  EXPECT_EQ(o.exitCode, code) << o.err;
  EXPECT_EQ(o.err.rfind("error: ", 0), 0u) << o.err;
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  for (const std::string& n : needles) EXPECT_NE(o.err.find(n), std::string::npos) << "no '" << n << "' in " << o.err;
}

float maxDiff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  if (a.shape() != b.shape()) return INFINITY;
  float d = 0;
  for (int64_t i = 0; i < a.numel(); ++i) d = std::max(d, std::abs(a.data<float>()[i] - b.data<float>()[i]));
  return d;
}

// ---- a module traced and saved by the user (Debian's torch 1.13) --------------------------------

constexpr const char* kUserModel = R"py(
import sys, numpy as np, torch, torch.nn as nn
class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1)
        self.fc = nn.Linear(6, 5)
    def forward(self, image, mask):
        h = torch.relu(self.conv(image)).mean(dim=(2, 3))
        return self.fc(h) * mask
torch.manual_seed(0)
m = Gate().eval()
image, mask = torch.randn(2, 3, 10, 10), torch.rand(2, 5)
torch.jit.trace(m, (image, mask)).save("user.pt")
np.save("image.npy", image.numpy()); np.save("mask.npy", mask.numpy())
with torch.no_grad():
    np.save("expected.npy", m(image, mask).numpy())
    image3, mask3 = torch.randn(3, 3, 10, 10), torch.rand(3, 5)
    np.save("image3.npy", image3.numpy()); np.save("mask3.npy", mask3.numpy())
    np.save("expected3.npy", m(image3, mask3).numpy())
)py";

class UserTraced : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    write(at("trace_user.py"), kUserModel);
    Outcome o = run("/usr/bin/python3 trace_user.py");
    ASSERT_EQ(o.exitCode, 0) << o.err;
  }
  static std::string shapes() { return " --input-shapes \"image:[2,3,10,10],mask:[2,5]\" "; }
};

TEST_F(UserTraced, EveryCommandWithoutShapesNamesTheFlagAndTheArguments) {
  std::vector<std::string> commands{"ir user.pt",
                                    "compile user.pt -o mod_noshapes",
                                    "compare user.pt --repeat 1 --no-torch-compile --no-store",
                                    "profile user.pt --repeat 1 --no-store",
                                    "sweep user.pt --batches 1 --backends kiln --repeat 1 --no-store",
                                    "tune user.pt --list-tasks --no-store",
                                    "doctor user.pt"};
  for (const std::string& c : commands) {
    SCOPED_TRACE(c);
    expectOneLineError(kiln(c), 5, {"user.pt: input shapes are unknown", "--input-shapes \"image:[...],mask:[...]\""});
  }
}

TEST_F(UserTraced, MalformedShapesAreUsageErrors) {
  struct Case {
    std::string text;
    int code;
    std::string needle;
  };
  std::vector<Case> cases{
      {"image:[2,3,10,10", 2, "missing ']'"},
      {"image:[2,x,10,10],mask:[2,5]", 2, "dimension 'x'"},
      {"image:[2,3,10,10]:float16,mask:[2,5]", 2, "unknown dtype 'float16'"},
      {"image:[2,3,10,10],[2,5]", 2, "name every input or none"},
      {"image:[2,3,10,10],image:[2,5]", 2, "given twice"},
      {"", 2, "--input-shapes"},
      {"image:[2,3,10,10],maks:[2,5]", 5, "no input 'maks' (its inputs: image, mask)"},
      {"image:[2,3,10,10]", 5, "no shape given for input(s) mask"},
      {"[2,3,10,10]", 5, "takes 2 input(s) (image, mask)"},
  };
  for (const Case& c : cases) {
    for (const char* cmd : {"ir user.pt", "compile user.pt -o mod_bad"}) {
      SCOPED_TRACE(std::string(cmd) + " " + c.text);
      Outcome o = kiln(std::string(cmd) + " --input-shapes \"" + c.text + "\"");
      // An empty value is a missing value for CLI11: usage either way.
      expectOneLineError(o, c.code, {c.needle});
    }
  }
}

TEST_F(UserTraced, RunCompileAndIrMatchTorch) {
  Tensor expected = kiln::runtime::readNpy(at("expected.npy"));
  // run: the .npy files give the shapes; --input-shapes is checked against them.
  Outcome o = kiln("run user.pt --input image.npy --input mask.npy --output y.npy");
  ASSERT_EQ(o.exitCode, 0) << o.err;
  EXPECT_LT(maxDiff(kiln::runtime::readNpy(at("y.npy")), expected), 1e-4);
  o = kiln("run user.pt --input image.npy --input mask.npy --output y2.npy" + shapes());
  ASSERT_EQ(o.exitCode, 0) << o.err;
  EXPECT_LT(maxDiff(kiln::runtime::readNpy(at("y2.npy")), expected), 1e-4);
  expectOneLineError(kiln("run user.pt --input image.npy --input mask.npy --input-shapes \"image:[1,3,10,10],mask:[1,5]\""),
                     5, {"image.npy", "--input-shapes says f32[1,3,10,10]"});

  // compile with the flag, then the exported module runs alone.
  o = kiln("compile user.pt -o mod" + shapes());
  ASSERT_EQ(o.exitCode, 0) << o.err;
  o = kiln("run mod --input image.npy --input mask.npy --output ym.npy");
  ASSERT_EQ(o.exitCode, 0) << o.err;
  EXPECT_LT(maxDiff(kiln::runtime::readNpy(at("ym.npy")), expected), 1e-4);

  // Unnamed shapes in forward order, dtypes spelled out, and --batch on top of them.
  o = kiln("ir user.pt --input-shapes \"[2,3,10,10]:float32,[2,5]:f32\" --batch 3");
  ASSERT_EQ(o.exitCode, 0) << o.err;
  EXPECT_NE(o.out.find("graph(%image: f32[3,3,10,10], %mask: f32[3,5])"), std::string::npos) << o.out;
  o = kiln("compile user.pt -o mod3 --batch 3" + shapes());
  ASSERT_EQ(o.exitCode, 0) << o.err;
  o = kiln("run mod3 --input image3.npy --input mask3.npy --output y3.npy");
  ASSERT_EQ(o.exitCode, 0) << o.err;
  EXPECT_LT(maxDiff(kiln::runtime::readNpy(at("y3.npy")), kiln::runtime::readNpy(at("expected3.npy"))), 1e-4);

  o = kiln("doctor user.pt" + shapes());
  ASSERT_EQ(o.exitCode, 0) << o.err;
  EXPECT_NE(o.out.find("aten::linear"), std::string::npos) << o.out;
}

TEST_F(UserTraced, MeasuringCommandsReachTheirWorkers) {
  // compare: every backend in worker processes of its own, Kiln's outputs against libtorch's.
  Outcome o = kiln("compare user.pt --repeat 1 --processes 1 --no-torch-compile --no-store --json cmp.json" + shapes());
  ASSERT_EQ(o.exitCode, 0) << o.err;
  nlohmann::json j = nlohmann::json::parse(std::ifstream(at("cmp.json")));
  int checked = 0;
  for (const auto& b : j.at("backends")) {
    SCOPED_TRACE(b.dump());
    ASSERT_TRUE(b.value("available", false));
    if (b.at("backend") == "kiln") {
      EXPECT_GE(b.at("max_abs_diff_vs_eager").get<double>(), 0);
      EXPECT_LT(b.at("max_abs_diff_vs_eager").get<double>(), 1e-4);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 1);
  // With --batch the workers open the model at that batch with the same shapes.
  o = kiln("compare user.pt --batch 3 --repeat 1 --processes 1 --backends pytorch-eager,kiln --no-store --json cmp3.json" + shapes());
  ASSERT_EQ(o.exitCode, 0) << o.err;
  j = nlohmann::json::parse(std::ifstream(at("cmp3.json")));
  EXPECT_EQ(j.at("batch"), 3);
  for (const auto& b : j.at("backends"))
    if (b.at("backend") == "kiln") {
      EXPECT_LT(b.at("max_abs_diff_vs_eager").get<double>(), 1e-4);
    }

  o = kiln("profile user.pt --repeat 1 --warmup 0 --no-store" + shapes());  // in its worker
  ASSERT_EQ(o.exitCode, 0) << o.err;
  EXPECT_NE(o.out.find("conv2d"), std::string::npos) << o.out;
  o = kiln("sweep user.pt --batches 1,2 --backends kiln,pytorch-eager --repeat 1 --budget 20 --no-store" + shapes());
  ASSERT_EQ(o.exitCode, 0) << o.err;
  EXPECT_EQ(o.out.find("failed"), std::string::npos) << o.out;
  o = kiln("tune user.pt --trials 2 --confirm 1 --no-store" + shapes());  // ends with the side-by-side check
  ASSERT_EQ(o.exitCode, 0) << o.err;
  EXPECT_NE(o.out.find("end to end"), std::string::npos) << o.out;
}

// ---- Python model references (Kiln's environment traces them) -----------------------------------

constexpr const char* kRefModels = R"py(
import torch
import torch.nn as nn

class SmallCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(16 * 4 * 4, 10)
    def forward(self, pixels):
        x = self.pool(torch.relu(self.bn1(self.conv1(pixels))))
        x = torch.relu(self.conv2(x))
        return self.fc(torch.flatten(x, 1))

class TwoInputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(12, 6)
        self.b = nn.Linear(4, 6)
    def forward(self, left, right):
        return torch.sigmoid(self.a(left)) + self.b(right)

def build():
    m = SmallCnn()
    # Live batch-norm statistics, so the check is not against a near-identity.
    m.bn1.running_mean.uniform_(-0.5, 0.5)
    m.bn1.running_var.uniform_(0.5, 2.0)
    return m, torch.randn(1, 3, 16, 16)

def build_two():
    return TwoInputs(), (torch.randn(2, 12), torch.randn(2, 4))

def raises():
    raise ValueError("no weights here")

def not_a_pair():
    return SmallCnn()

class Untraceable(nn.Module):
    def forward(self, x):
        return x.sum().item()

def untraceable():
    return Untraceable(), torch.randn(3)
)py";

/// Kiln's Python environment runs the reference module's weights through load_reference.
constexpr const char* kRefOutputs = R"py(
import sys, json, numpy as np, torch
sys.path.insert(0, sys.argv[1])
from kiln_workers.model_ref import load_reference
ref, state, out = sys.argv[2], sys.argv[3], sys.argv[4]
inputs = [torch.from_numpy(np.load(p)) for p in sys.argv[5:]]
with torch.no_grad():
    np.save(out, load_reference(ref, state)(*inputs).numpy())
)py";

class PythonRef : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    write(at("my_models.py"), kRefModels);
    write(at("ref_outputs.py"), kRefOutputs);
  }
  /// The cache folder of the only traced reference whose manifest names `attr`.
  static std::string cacheDirOf(const std::string& attr) {
    std::string found;
    if (!fs::exists(at("cache/kiln/refs"))) return found;
    for (const auto& e : fs::directory_iterator(at("cache/kiln/refs"))) {
      if (!fs::exists(e.path() / "manifest.json")) continue;
      nlohmann::json m = nlohmann::json::parse(std::ifstream(e.path() / "manifest.json"));
      if (m.at("attr") == attr) found = e.path().string();
    }
    return found;
  }
};

TEST_F(PythonRef, RunIrCompileAndCompareMatchTheModule) {
  Outcome o = kiln("ir my_models.py:build");
  ASSERT_EQ(o.exitCode, 0) << o.err;
  // The traced file records its inputs (kiln.json): no --input-shapes needed, names kept.
  EXPECT_NE(o.out.find("graph(%pixels: f32[1,3,16,16])"), std::string::npos) << o.out;
  std::string cache = cacheDirOf("build");
  ASSERT_FALSE(cache.empty());
  for (const char* f : {"model.pt", "state_dict.pt", "input0.npy", "manifest.json"})
    EXPECT_TRUE(fs::exists(cache + "/" + f)) << f;

  // The module with the saved weights (load_reference) on the example input, in today's torch.
  o = run(std::string(KILN_PYENV_PYTHON) + " ref_outputs.py " + KILN_SOURCE_DIR + "/python my_models.py:build " + cache +
          "/state_dict.pt expected_ref.npy " + cache + "/input0.npy");
  ASSERT_EQ(o.exitCode, 0) << o.err;
  Tensor expected = kiln::runtime::readNpy(at("expected_ref.npy"));

  o = kiln("run my_models.py:build --input " + cache + "/input0.npy --output ref_y.npy");
  ASSERT_EQ(o.exitCode, 0) << o.err;
  EXPECT_LT(maxDiff(kiln::runtime::readNpy(at("ref_y.npy")), expected), 1e-4);

  o = kiln("compile my_models.py:build -o ref_mod");
  ASSERT_EQ(o.exitCode, 0) << o.err;
  o = kiln("run ref_mod --input " + cache + "/input0.npy --output ref_ym.npy");
  ASSERT_EQ(o.exitCode, 0) << o.err;
  EXPECT_LT(maxDiff(kiln::runtime::readNpy(at("ref_ym.npy")), expected), 1e-4);

  o = kiln("compare my_models.py:build --backends pytorch-eager,kiln --repeat 1 --processes 1 --no-store --json ref.json");
  ASSERT_EQ(o.exitCode, 0) << o.err;
  nlohmann::json j = nlohmann::json::parse(std::ifstream(at("ref.json")));
  EXPECT_EQ(j.at("model"), "my_models.py:build");
  for (const auto& b : j.at("backends")) {
    ASSERT_TRUE(b.value("available", false)) << b.dump();
    if (b.at("backend") == "kiln") {
      EXPECT_LT(b.at("max_abs_diff_vs_eager").get<double>(), 1e-4);
    }
  }

  o = kiln("doctor my_models.py:build");
  ASSERT_EQ(o.exitCode, 0) << o.err;
  EXPECT_NE(o.out.find("aten::batch_norm"), std::string::npos) << o.out;
}

TEST_F(PythonRef, TwoInputsByDottedModuleName) {
  // pkg.mod:attr from the working directory, with two inputs named after forward's arguments.
  Outcome o = kiln("ir my_models:build_two");
  ASSERT_EQ(o.exitCode, 0) << o.err;
  EXPECT_NE(o.out.find("graph(%left: f32[2,12], %right: f32[2,4])"), std::string::npos) << o.out;
  std::string cache = cacheDirOf("build_two");
  ASSERT_FALSE(cache.empty());
  o = run(std::string(KILN_PYENV_PYTHON) + " ref_outputs.py " + KILN_SOURCE_DIR + "/python my_models.py:build_two " +
          cache + "/state_dict.pt expected_two.npy " + cache + "/input0.npy " + cache + "/input1.npy");
  ASSERT_EQ(o.exitCode, 0) << o.err;
  o = kiln("run my_models:build_two --input " + cache + "/input0.npy --input " + cache + "/input1.npy --output two.npy");
  ASSERT_EQ(o.exitCode, 0) << o.err;
  EXPECT_LT(maxDiff(kiln::runtime::readNpy(at("two.npy")), kiln::runtime::readNpy(at("expected_two.npy"))), 1e-5);
  // --input-shapes overrides a reference's traced shapes too.
  o = kiln("ir my_models:build_two --input-shapes \"right:[5,4],left:[5,12]\"");
  ASSERT_EQ(o.exitCode, 0) << o.err;
  EXPECT_NE(o.out.find("graph(%left: f32[5,12], %right: f32[5,4])"), std::string::npos) << o.out;
}

TEST_F(PythonRef, BadReferencesAreOneLineErrors) {
  write(at("broken.py"), "import torch\ndef build(:\n");
  struct Case {
    std::string ref;
    int code;
    std::vector<std::string> needles;
  };
  std::vector<Case> cases{
      {"missing.py:build", 6, {"missing.py:build: no such file"}},
      {"no_such_package.models:build", 6, {"no module named 'no_such_package.models'"}},
      {"my_models.py:nope", 3, {"has no attribute 'nope'", "build"}},
      {"my_models.py:raises", 3, {"raises() raised ValueError: no weights here"}},
      {"my_models.py:not_a_pair", 3, {"must return (nn.Module, example_inputs)"}},
      {"broken.py:build", 3, {"cannot import", "SyntaxError"}},
      {"my_models.py:untraceable", 4, {"torch.jit.trace failed"}},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    SCOPED_TRACE(c.ref);
    expectOneLineError(kiln("ir " + c.ref), c.code, c.needles);
    // Every command opens a model through the same façade call: one more entry point suffices.
    if (i % 3 == 0) expectOneLineError(kiln("compare " + c.ref + " --no-store"), c.code, c.needles);
  }
}

TEST_F(PythonRef, TheCacheIsReusedUntilTheFileChanges) {
  write(at("cached.py"), std::string(kRefModels));
  Outcome o = kiln("ir cached.py:build");
  ASSERT_EQ(o.exitCode, 0) << o.err;
  std::string first;
  for (const auto& e : fs::directory_iterator(at("cache/kiln/refs"))) {
    if (!fs::exists(e.path() / "manifest.json")) continue;
    nlohmann::json m = nlohmann::json::parse(std::ifstream(e.path() / "manifest.json"));
    if (m.value("file", nlohmann::json()).is_string() && m["file"].get<std::string>().ends_with("cached.py")) first = e.path();
  }
  ASSERT_FALSE(first.empty());
  auto stamp = fs::last_write_time(first + "/model.pt");
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  o = kiln("ir cached.py:build");
  ASSERT_EQ(o.exitCode, 0) << o.err;
  EXPECT_EQ(fs::last_write_time(first + "/model.pt"), stamp) << "traced again";
  // A changed file is traced again, into a folder of its own.
  write(at("cached.py"), std::string(kRefModels) + "\n# edited\n");
  o = kiln("ir cached.py:build");
  ASSERT_EQ(o.exitCode, 0) << o.err;
  int folders = 0;
  for (const auto& e : fs::directory_iterator(at("cache/kiln/refs"))) {
    if (!fs::exists(e.path() / "manifest.json")) continue;
    nlohmann::json m = nlohmann::json::parse(std::ifstream(e.path() / "manifest.json"));
    if (m.value("file", nlohmann::json()).is_string() && m["file"].get<std::string>().ends_with("cached.py")) ++folders;
  }
  EXPECT_EQ(folders, 2);
}

TEST_F(PythonRef, BenchSetupsCarryTheReferenceAndItsWeights) {
  // Kiln's measure-worker setups are logged by a wrapper program; the Python rows say in their
  // facts which module they ran, and agree with Kiln's outputs on the traced weights.
  std::string log = at("setups.log");
  write(at("logging_worker.sh"), "#!/bin/sh\nread -r line\necho \"$line\" >> " + log + "\n{ echo \"$line\"; cat; } | exec " +
                                     std::string(KILN_BINARY) + " \"$@\"\n");
  fs::permissions(at("logging_worker.sh"), fs::perms::owner_all);
  fs::remove(log);
  Outcome o = run("KILN_WORKER=" + at("logging_worker.sh") + " " + KILN_BINARY +
                  " compare my_models.py:build --backends pytorch-eager,kiln --repeat 1 --processes 1 --no-store --json " +
                  at("compare.json"));
  ASSERT_EQ(o.exitCode, 0) << o.err;
  std::ifstream in(log);
  int setups = 0;
  for (std::string line; std::getline(in, line);) {
    nlohmann::json setup = nlohmann::json::parse(line);
    SCOPED_TRACE(line);
    EXPECT_TRUE(setup.at("python_ref").get<std::string>().ends_with("/my_models.py:build"));
    EXPECT_TRUE(fs::exists(setup.at("state_dict").get<std::string>()));
    EXPECT_TRUE(fs::exists(setup.at("path").get<std::string>()));  // the traced file
    ++setups;
  }
  EXPECT_EQ(setups, 1);  // kiln's; pytorch-eager runs in the Python worker
  nlohmann::json j = nlohmann::json::parse(std::ifstream(at("compare.json")));
  bool sawEager = false;
  for (const auto& b : j.at("backends")) {
    SCOPED_TRACE(b.dump());
    ASSERT_TRUE(b.at("available").get<bool>());
    if (b.at("backend") == "pytorch-eager") {
      sawEager = true;
      EXPECT_EQ(b.at("facts").at("module"), "python");
      EXPECT_TRUE(b.at("facts").at("module_source").get<std::string>().ends_with("my_models.py:build"));
    } else {
      EXPECT_LT(b.at("max_abs_diff_vs_eager").get<double>(), 1e-4);  // the same weights
    }
  }
  EXPECT_TRUE(sawEager);
}

// ---- the text form ------------------------------------------------------------------------------

TEST(InputShapesText, ParsesAndPrintsBack) {
  auto specs = kiln::app::parseInputShapes(" x : [1, 3,224,224] , ids:[1,128]:int64,flag:[]:bool ");
  ASSERT_TRUE(specs.ok()) << specs.error().message;
  ASSERT_EQ(specs->size(), 3u);
  EXPECT_EQ(specs.value()[0].name, "x");
  EXPECT_EQ(specs.value()[0].shape, (kiln::runtime::Shape{1, 3, 224, 224}));
  EXPECT_EQ(specs.value()[1].dtype, kiln::runtime::DType::Int64);
  EXPECT_TRUE(specs.value()[2].shape.empty());
  EXPECT_EQ(kiln::app::inputShapesText(specs.value()), "x:[1,3,224,224],ids:[1,128]:int64,flag:[]:bool");
  auto again = kiln::app::parseInputShapes(kiln::app::inputShapesText(specs.value()));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(kiln::app::inputShapesText(again.value()), kiln::app::inputShapesText(specs.value()));
  for (const char* bad : {"x:[1,-3]", "x:[1,3", "x:1,3", "x:[1]:f16", "x:[1],[2]", ",", "x:[[1]]", "x[1]"}) {
    auto r = kiln::app::parseInputShapes(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.error().kind, kiln::ErrorKind::Usage) << bad;
    }
  }
}

TEST(InputShapesText, MatchesNamesToTheForwardArguments) {
  auto named = kiln::app::parseInputShapes("b:[2],a:[1]").value();
  auto matched = kiln::app::matchInputNames(named, {"a", "b"});
  ASSERT_EQ(matched.size(), 2u);
  EXPECT_EQ(matched[0].name, "a");
  EXPECT_EQ(matched[1].shape, (kiln::runtime::Shape{2}));
  auto unnamed = kiln::app::matchInputNames(kiln::app::parseInputShapes("[1],[2]").value(), {"a", "b"});
  EXPECT_EQ(unnamed[1].name, "b");
  EXPECT_THROW(kiln::app::matchInputNames(named, {"a", "c"}), kiln::Error);
  EXPECT_THROW(kiln::app::matchInputNames(kiln::app::parseInputShapes("[1]").value(), {"a", "b"}), kiln::Error);
}

TEST(PythonReferences, AreToldApartFromFiles) {
  using kiln::app::parsePythonReference;
  auto file = parsePythonReference("models/my_models.py:build");
  ASSERT_TRUE(file.has_value());
  EXPECT_TRUE(file->file.ends_with("/models/my_models.py"));
  EXPECT_EQ(file->attr, "build");
  auto module = parsePythonReference("pkg.models:Factory.make");
  ASSERT_TRUE(module.has_value());
  EXPECT_EQ(module->module, "pkg.models");
  EXPECT_EQ(module->attr, "Factory.make");
  for (const char* notRef : {"model.pt", "dir/model:x.pt", "a:b:c/d", ":build", "my.py:", "2pkg:x", "pkg..m:x"})
    EXPECT_FALSE(parsePythonReference(notRef).has_value()) << notRef;
  EXPECT_FALSE(parsePythonReference(KILN_BINARY).has_value());  // an existing file is a file
}

}  // namespace
