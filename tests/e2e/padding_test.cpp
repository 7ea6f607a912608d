// Padding (issue 18): F.pad in every mode, the padding kernels by name, convolutions with
// padding="same"/"valid", ONNX Pad and Conv's asymmetric pads, compiled by Kiln at -O0 (one kernel
// per op), -O2 (fusion, pads folded into convolutions) and -O3 (packed layout) and run, against
// the reference engine on the same inputs:
// - op modules: scripted with libtorch in the test, checked against libtorch running them;
// - a small CNN (reflect, replicate and circular pads, even-kernel and dilated "same"
//   convolutions, a 1-D "same" convolution) traced and saved by today's torch in Kiln's Python
//   environment, the way users save models, checked against libtorch within 1e-4;
// - ONNX Pad models (every mode, pads as initializers, Constant nodes and attributes, axes) and
//   Conv with asymmetric pads / auto_pad, written with the `onnx` package and run by ONNX Runtime
//   in that environment for the reference outputs;
// - bad padding: one line on stderr from `kiln run`, with the documented exit code.
// ZooOps: in-place writes through views and einsum (what Swin and MaxViT need), compiled the same
// way against libtorch, and as a torch.export program against today's torch.
// The Python parts skip with a message only when the environment is missing (CI has it).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "app/facade.h"
#include "profiler/torch_baseline.h"
#include "runtime/npy.h"
#include "runtime/tensor_values.h"
#include "tests/e2e/process.h"
#include "tests/unit/importers/importer_test_util.h"

using namespace kiln;

namespace {

const std::string f32 = "float32";

std::string tempDir(const std::string& name) {
  std::string dir = ::testing::TempDir() + "kiln_padding_" + name;
  std::filesystem::create_directories(dir);
  return dir;
}

std::string specOf(const std::vector<std::pair<std::string, std::string>>& inputs) {
  std::string json = R"({"inputs": [)";
  for (size_t i = 0; i < inputs.size(); ++i) {
    json += (i ? ", " : "") + std::string(R"({"name": "x)") + std::to_string(i) + R"(", "shape": )" + inputs[i].first +
            R"(, "dtype": ")" + inputs[i].second + R"("})";
  }
  return json + "]}";
}

/// "" when `actual` matches `expected` (|a − e| ≤ atol + rtol·|e|, integers exactly), else why.
std::string compare(const std::vector<runtime::Tensor>& actual, const std::vector<runtime::Tensor>& expected,
                    double tol) {
  if (actual.size() != expected.size())
    return std::to_string(actual.size()) + " outputs, expected " + std::to_string(expected.size());
  for (size_t o = 0; o < actual.size(); ++o) {
    const runtime::Tensor &a = actual[o], &e = expected[o];
    if (a.shape() != e.shape())
      return "output " + std::to_string(o) + " has shape " + runtime::shapeString(a.shape()) + ", expected " +
             runtime::shapeString(e.shape());
    if (a.dtype() != e.dtype()) return "output " + std::to_string(o) + " has another dtype";
    bool exact = a.dtype() != runtime::DType::Float32 && a.dtype() != runtime::DType::Float64;
    for (int64_t i = 0; i < a.numel(); ++i) {
      double av = runtime::elementAsDouble(a, i), ev = runtime::elementAsDouble(e, i);
      if (exact ? av == ev : std::fabs(av - ev) <= tol * (1 + std::fabs(ev))) continue;
      std::ostringstream s;
      s << "output " << o << " element " << i << ": " << av << ", expected " << ev;
      return s.str();
    }
  }
  return "";
}

int countOps(const core::Graph& graph, const std::string& op, const std::string& mode = {}) {
  int n = 0;
  for (const core::Node& node : graph.nodes())
    n += node.op == op && (mode.empty() || node.attrs.getString("mode") == mode);
  return n;
}

/// Builds `model` at each level, runs it on `inputs` and expects `expected`. Returns the pad
/// nodes left in each build's graph.
std::map<int, int> expectCompiledMatches(const std::shared_ptr<const app::Model>& model,
                                         const std::vector<runtime::Tensor>& inputs,
                                         const std::vector<runtime::Tensor>& expected, double tol,
                                         const std::vector<int>& levels = {0, 2, 3}) {
  std::map<int, int> pads;
  for (int opt : levels) {
    app::BuildOptions options;
    options.optLevel = opt;
    options.threads = 2;
    options.verifyPasses = true;
    auto compiled = app::build(model, options);
    if (!compiled) {
      ADD_FAILURE() << "-O" << opt << ": " << compiled.error().message;
      continue;
    }
    auto outputs = app::run(*compiled.value(), inputs);
    if (!outputs) {
      ADD_FAILURE() << "-O" << opt << ": " << outputs.error().message;
      continue;
    }
    EXPECT_EQ(compare(outputs.value(), expected, tol), "") << "-O" << opt;
    pads[opt] = countOps(compiled.value()->graph, "pad");
  }
  return pads;
}

struct Module {
  std::string name, forward;
  std::vector<std::pair<std::string, std::string>> inputs;
  std::vector<std::pair<std::string, at::Tensor>> buffers = {};
};

/// Saves `m` as a scripted module, imports it, and checks every build against libtorch.
std::map<int, int> checkModule(const Module& m, double tol = 1e-6, std::vector<runtime::Tensor> inputs = {}) {
  SCOPED_TRACE(m.name);
  std::string path = importers::testing::saveScriptedModule("Pad" + m.name, m.forward, specOf(m.inputs), m.buffers);
  auto model = app::openModel(path);
  if (!model) {
    ADD_FAILURE() << model.error().message;
    return {};
  }
  if (inputs.empty()) inputs = app::randomInputs(*model.value(), 3);
  profiler::TorchModel torchModel(path, profiler::TorchMode::Eager, 1);
  std::vector<runtime::Tensor> expected = torchModel.run(inputs);
  return expectCompiledMatches(model.value(), inputs, expected, tol);
}

// --- op modules against libtorch ---------------------------------------------------------------

TEST(PadOps, EveryModeOnOddShapes) {
  const std::vector<Module> modules = {
      {"Reflect", "def forward(self, x0):\n  return torch.pad(x0, [2, 3, 4, 1], 'reflect')\n", {{"[2, 3, 7, 9]", f32}}},
      {"Reflect1d", "def forward(self, x0):\n  return torch.pad(x0, [3, 1], 'reflect')\n", {{"[2, 5, 11]", f32}}},
      {"Replicate", "def forward(self, x0):\n  return torch.pad(x0, [1, 5, 0, 3], 'replicate')\n", {{"[1, 3, 7, 9]", f32}}},
      {"Replicate3d", "def forward(self, x0):\n  return torch.pad(x0, [1, 2, 2, 1, 1, 3], 'replicate')\n",
       {{"[1, 2, 3, 5, 4]", f32}}},
      {"Circular", "def forward(self, x0):\n  return torch.pad(x0, [3, 2, 1, 4], 'circular')\n", {{"[2, 3, 5, 7]", f32}}},
      {"Constant", "def forward(self, x0):\n  return torch.pad(x0, [1, 2, 3, 0, 1, 1], 'constant', -0.5)\n",
       {{"[2, 3, 7, 9]", f32}}},
      {"Crop", "def forward(self, x0):\n  return torch.pad(x0, [-2, 3, 1, -1])\n", {{"[2, 3, 7, 9]", f32}}},
      {"ReflectCrop", "def forward(self, x0):\n  return torch.pad(x0, [2, -3, -1, 3], 'reflect')\n",
       {{"[1, 2, 7, 9]", f32}}},
      {"Kernels",
       "def forward(self, x0):\n"
       "  a = torch.reflection_pad2d(x0, [1, 2, 3, 1])\n"
       "  b = torch.replication_pad2d(x0, [0, 5, 2, 2])\n"
       "  return a, b, torch.constant_pad_nd(x0, [1, 1, 2, 0], 1.5), torch._pad_circular(x0, [2, 3, 1, 1])\n",
       {{"[2, 3, 5, 7]", f32}}},
      // Large enough for parallel loops and full vectors in the copies.
      {"LargeReflect", "def forward(self, x0):\n  return torch.pad(x0, [3, 3, 3, 3], 'reflect')\n",
       {{"[1, 16, 33, 35]", f32}}},
      {"LargeConstant", "def forward(self, x0):\n  return torch.pad(x0, [1, 2, 1, 2])\n", {{"[1, 16, 33, 35]", f32}}},
  };
  for (const Module& m : modules) {
    std::map<int, int> pads = checkModule(m);
    EXPECT_GE(pads[0], 1) << m.name << ": the -O0 build computes the pad itself";
  }
}

// In-place writes through views (made functional as where(mask, pad(value), base), or folded to
// constants) and einsum (transpose/reshape/matmul/sum), the constructs Swin and MaxViT need,
// compiled at every level.
TEST(ZooOps, ViewWritesAndEinsumCompiled) {
  checkModule({"ViewWrites",
               "def forward(self, x0, x1):\n"
               "  y = x0 * 2.0\n"
               "  y[:, 1:3] = x1\n"
               "  y[0, 2:] = 0.5\n"
               "  y[1:3, 3:5].mul_(3.0)\n"
               "  m = x0.new_zeros([4, 6])\n"
               "  m[0:-1, 0:-2] = 1.0\n"
               "  m[-1, :] = 2.0\n"
               "  return y + m, torch.einsum('ij,kj->ik', [y, x0])\n",
               {{"[4, 6]", f32}, {"[4, 2]", f32}}},
              1e-5);
  checkModule({"Einsum",
               "def forward(self, x0, x1, x2):\n"
               "  a = torch.einsum('b h w c, h k c -> b h w k', [x0, x1])\n"
               "  b = torch.einsum('BGHID,BGHJD->BGHIJ', [x2, x2])\n"
               "  return a, torch.einsum('BGHIJ,BGHJD->BGHID', [b, x2]), torch.einsum('...ij->...', [x0])\n",
               {{"[2, 3, 5, 6]", f32}, {"[3, 7, 6]", f32}, {"[1, 2, 3, 5, 8]", f32}}},
              1e-4);
}

TEST(PadOps, IntegerTensorsPadExactly) {
  // (libtorch 1.13 has no integer reflection or replication kernels to compare with.)
  runtime::Tensor x = runtime::Tensor::zeros(runtime::DType::Int64, {2, 3, 5});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<int64_t>()[i] = (i * 7919) % 23 - 11;
  checkModule({"Int", "def forward(self, x0):\n  return torch.pad(x0, [2, 1, 1, 1], 'constant', 3.0), "
                      "torch.pad(x0, [2, 1], 'circular')\n",
               {{"[2, 3, 5]", "int64"}}},
              0, {x});
}

TEST(PadOps, ZeroPadBeforeConvolutionFoldsIntoItsPadding) {
  // fold-pad-into-conv at -O2 and up: the symmetric zero pad disappears into conv2d's padding;
  // the asymmetric one and the reflect one stay.
  std::map<int, int> pads = checkModule(
      {"FoldIntoConv",
       "def forward(self, x0):\n"
       "  a = torch.conv2d(torch.pad(x0, [2, 2, 1, 1]), self.w, self.b, [1, 1], [0, 1])\n"
       "  b = torch.conv2d(torch.pad(x0, [1, 2, 1, 1]), self.w)\n"
       "  c = torch.conv2d(torch.pad(x0, [1, 1, 1, 1], 'reflect'), self.w)\n"
       "  return torch.relu(a), b, c\n",
       {{"[1, 3, 9, 11]", f32}},
       {{"w", torch::randn({4, 3, 3, 3})}, {"b", torch::randn({4})}}},
      1e-4);
  EXPECT_EQ(pads[0], 3);
  EXPECT_EQ(pads[2], 2);
  EXPECT_EQ(pads[3], 2);
}

TEST(PadOps, ConvolutionModesSameAndValid) {
  checkModule({"ConvModes",
               "def forward(self, x0, x1):\n"
               "  a = torch._convolution_mode(x0, self.w4, self.b, [1, 1], 'same', [1, 1], 1)\n"
               "  b = torch._convolution_mode(x0, self.w3, self.b, [1, 1], 'same', [2, 3], 1)\n"
               "  c = torch._convolution_mode(x0, self.w2, None, [1, 1], 'same', [3, 1], 1)\n"
               "  d = torch._convolution_mode(x0, self.w4, self.b, [2, 3], 'valid', [1, 2], 1)\n"
               "  e = torch._convolution_mode(x0, self.g, None, [1, 1], 'same', [1, 1], 5)\n"
               "  f = torch._convolution_mode(x1, self.v, None, [1], 'same', [1], 1)\n"
               "  g = torch._convolution_mode(x1, self.v, None, [1], 'same', [3], 1)\n"
               "  return a, b, c, d, e, f, g\n",
               {{"[1, 5, 13, 10]", f32}, {"[2, 5, 17]", f32}},
               {{"w4", torch::randn({6, 5, 4, 4})},
                {"w3", torch::randn({6, 5, 3, 3})},
                {"w2", torch::randn({6, 5, 2, 3})},
                {"g", torch::randn({5, 1, 4, 2})},
                {"b", torch::randn({6})},
                {"v", torch::randn({4, 5, 4})}}},
              1e-4);
}

// --- a small CNN traced by today's torch ---------------------------------------------------------

const char* kTraceScript = R"(import json, sys
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class PadNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.pad = nn.ReflectionPad2d(2)
        self.c1 = nn.Conv2d(3, 8, 5)
        self.c2 = nn.Conv2d(8, 8, 4, padding="same")
        self.bn = nn.BatchNorm2d(8)
        self.c3 = nn.Conv2d(8, 16, 3, padding="same", dilation=2)
        self.c4 = nn.Conv2d(16, 16, 3, stride=2, padding="valid")
        self.c5 = nn.Conv1d(16, 8, 2, padding="same")
        for m in self.modules():
            if isinstance(m, (nn.Conv1d, nn.Conv2d)):
                nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
                nn.init.uniform_(m.bias, -0.5, 0.5)
        self.bn.running_mean.uniform_(-0.5, 0.5)
        self.bn.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        y = F.relu(self.c1(self.pad(x)))
        y = F.relu(self.bn(self.c2(y)))
        y = F.pad(y, (1, 1, 1, 1), mode="replicate")
        y = F.relu(self.c3(y))
        y = self.c4(F.pad(y, (1, 1, 1, 1)))
        y = F.pad(y, (2, 1, 0, 3), mode="circular")
        return self.c5(y.flatten(2))


net = PadNet().eval()
x = torch.randn(1, 3, 31, 29)
traced = torch.jit.trace(net, x)
spec = {"inputs": [{"name": "x", "shape": list(x.shape), "dtype": "float32"}], "source": "padding_test"}
torch.jit.save(traced, sys.argv[1], _extra_files={"kiln.json": json.dumps(spec)})
print(float(net(x).std()))
)";

bool havePython() {
  return std::filesystem::exists(KILN_PYENV_PYTHON);
}

testing_support::Outcome runPython(const std::string& dir, const std::string& script, const std::string& args) {
  std::string file = dir + "/script.py";
  std::ofstream(file) << script;
  return testing_support::runProcess(std::string(KILN_PYENV_PYTHON) + " " + file + " " + args, dir + "/stderr.txt");
}

TEST(PadModel, CnnTracedByTodaysTorchMatchesLibtorch) {
  if (!havePython()) GTEST_SKIP() << "Kiln's Python environment (" << KILN_PYENV_PYTHON << ") is missing: run scripts/install-deps.sh";
  std::string dir = tempDir("cnn");
  std::string path = dir + "/pad_net.pt";
  testing_support::Outcome o = runPython(dir, kTraceScript, path);
  ASSERT_EQ(o.exitCode, 0) << o.err;
  EXPECT_GT(std::stod(o.out), 0.1) << "activations should stay O(1)";
  auto model = app::openModel(path);
  ASSERT_TRUE(model) << model.error().message;
  // The trace holds aten::pad in three modes and aten::_convolution_mode: all imported.
  const core::Graph& graph = model.value()->graph;
  EXPECT_EQ(countOps(graph, "pad", "reflect"), 1);
  EXPECT_EQ(countOps(graph, "pad", "replicate"), 1);
  EXPECT_EQ(countOps(graph, "pad", "circular"), 1);
  EXPECT_EQ(countOps(graph, "pad", "constant"), 3);  // c2's and c5's "same" (even kernels), the zero pad
  EXPECT_EQ(countOps(graph, "conv2d"), 5);
  std::vector<runtime::Tensor> inputs = app::randomInputs(*model.value(), 11);
  profiler::TorchModel torchModel(path, profiler::TorchMode::Eager, 1);
  std::vector<runtime::Tensor> expected = torchModel.run(inputs);
  std::map<int, int> pads = expectCompiledMatches(model.value(), inputs, expected, 1e-4, {0, 2, 3});
  EXPECT_EQ(pads[0], 6);
  EXPECT_EQ(pads[3], 5);  // the zero pad before c4 became its padding
}

// A torch.export program holds Swin's mask writes as aten.slice + aten.fill_ (in place, through
// views) and MaxViT's einsum; imported from the .pt2 and compiled, against today's torch.
const char* kExportWritesScript = R"(import os, sys
import numpy as np
import torch


class Windows(torch.nn.Module):
    def forward(self, x, q, k):
        m = x.new_zeros((6, 8))
        m[0:-2, 0:-3] = 1.0
        m[-2:, -3:] = 2.0
        m[1, 2:5] = 3.0
        y = x * 2.0
        y[:, 1:3] = 0.5
        return y + m, torch.einsum("bhid,bhjd->bhij", q, k)


out = sys.argv[1]
torch.manual_seed(0)
inputs = (torch.randn(6, 8), torch.randn(1, 2, 5, 4), torch.randn(1, 2, 7, 4))
torch.export.save(torch.export.export(Windows(), inputs), os.path.join(out, "windows.pt2"))
for i, t in enumerate(inputs):
    np.save(os.path.join(out, f"x{i}.npy"), t.numpy())
with torch.no_grad():
    for i, t in enumerate(Windows()(*inputs)):
        np.save(os.path.join(out, f"y{i}.npy"), t.numpy())
)";

TEST(ZooOps, TorchExportWritesThroughViewsAndEinsum) {
  if (!havePython()) GTEST_SKIP() << "Kiln's Python environment (" << KILN_PYENV_PYTHON << ") is missing: run scripts/install-deps.sh";
  std::string dir = tempDir("export_writes");
  testing_support::Outcome o = runPython(dir, kExportWritesScript, dir);
  ASSERT_EQ(o.exitCode, 0) << o.err;
  auto model = app::openModel(dir + "/windows.pt2");
  ASSERT_TRUE(model) << model.error().message;
  std::vector<runtime::Tensor> inputs, expected;
  for (int i = 0; i < 3; ++i) inputs.push_back(runtime::readNpy(dir + "/x" + std::to_string(i) + ".npy"));
  for (int i = 0; i < 2; ++i) expected.push_back(runtime::readNpy(dir + "/y" + std::to_string(i) + ".npy"));
  expectCompiledMatches(model.value(), inputs, expected, 1e-5, {0, 2, 3});
  EXPECT_EQ(countOps(model.value()->graph, "where"), 1);  // y's write; the mask's fold to a constant
}

// --- ONNX Pad and Conv, against ONNX Runtime ---------------------------------------------------

const char* kOnnxScript = R"(import json, os, sys
import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
rng = np.random.default_rng(0)
cases = []


def ints(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def save(name, opset, x_shape, nodes, inits=(), outputs=("y",), run=True):
    graph = helper.make_graph(list(nodes), name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
                              initializer=list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    path = os.path.join(out, name + ".onnx")
    onnx.save(model, path)
    if not run:
        return
    x = rng.standard_normal(x_shape).astype(np.float32)
    ys = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.save(os.path.join(out, name + ".x.npy"), x)
    for i, y in enumerate(ys):
        np.save(os.path.join(out, f"{name}.y{i}.npy"), y)
    cases.append({"name": name, "outputs": len(ys)})


s = [2, 3, 5, 7]
save("constant_initializers", 13, s, [helper.make_node("Pad", ["x", "pads", "cv"], ["y"], mode="constant")],
     [ints("pads", [0, 1, 2, 0, 0, 0, 1, 3]), numpy_helper.from_array(np.array(0.75, np.float32), "cv")])
save("reflect_constant_node", 13, s,
     [helper.make_node("Constant", [], ["pads"], value=ints("p", [0, 0, 2, 3, 0, 0, 1, 4])),
      helper.make_node("Pad", ["x", "pads"], ["y"], mode="reflect")])
save("edge", 11, s, [helper.make_node("Pad", ["x", "pads"], ["y"], mode="edge")], [ints("pads", [0, 1, 3, 2, 1, 0, 2, 5])])
save("wrap", 19, s, [helper.make_node("Pad", ["x", "pads"], ["y"], mode="wrap")], [ints("pads", [0, 0, 2, 6, 0, 0, 4, 3])])
save("axes", 18, s, [helper.make_node("Pad", ["x", "pads", "", "axes"], ["y"], mode="constant")],
     [ints("pads", [2, 1, 0, 3]), ints("axes", [-1, 1])])
save("attributes_opset10", 10, s, [helper.make_node("Pad", ["x"], ["y"], mode="constant", pads=[0, 0, 1, 2, 1, 0, 0, 3], value=-2.0)])
save("crop", 13, s, [helper.make_node("Pad", ["x", "pads"], ["y"])], [ints("pads", [0, 0, -1, 2, 0, 0, 1, -3])])
w = numpy_helper.from_array(rng.standard_normal([4, 3, 4, 3]).astype(np.float32), "w")
b = numpy_helper.from_array(rng.standard_normal([4]).astype(np.float32), "b")
save("conv_padding", 13, [1, 3, 11, 9],
     [helper.make_node("Conv", ["x", "w", "b"], ["y0"], pads=[1, 0, 2, 1]),
      helper.make_node("Conv", ["x", "w"], ["y1"], auto_pad="SAME_UPPER"),
      helper.make_node("Conv", ["x", "w", "b"], ["y2"], auto_pad="SAME_LOWER", strides=[2, 2]),
      helper.make_node("Conv", ["x", "w"], ["y3"], auto_pad="VALID", dilations=[2, 1])],
     [w, b], outputs=("y0", "y1", "y2", "y3"))
save("reflect_too_large", 13, s, [helper.make_node("Pad", ["x", "pads"], ["y"], mode="reflect")],
     [ints("pads", [0, 0, 5, 0, 0, 0, 0, 0])], run=False)
save("unknown_mode", 13, s, [helper.make_node("Pad", ["x", "pads"], ["y"], mode="mirror")],
     [ints("pads", [0, 0, 1, 1, 0, 0, 1, 1])], run=False)
json.dump(cases, open(os.path.join(out, "cases.json"), "w"))
)";

TEST(PadOnnx, PadAndConvPaddingMatchOnnxRuntime) {
  if (!havePython()) GTEST_SKIP() << "Kiln's Python environment (" << KILN_PYENV_PYTHON << ") is missing: run scripts/install-deps.sh";
  std::string dir = tempDir("onnx");
  testing_support::Outcome o = runPython(dir, kOnnxScript, dir);
  ASSERT_EQ(o.exitCode, 0) << o.err;
  nlohmann::json cases = nlohmann::json::parse(std::ifstream(dir + "/cases.json"));
  ASSERT_EQ(cases.size(), 8u);
  for (const auto& c : cases) {
    std::string name = c.at("name");
    SCOPED_TRACE(name);
    auto model = app::openModel(dir + "/" + name + ".onnx");
    ASSERT_TRUE(model) << model.error().message;
    std::vector<runtime::Tensor> inputs = {runtime::readNpy(dir + "/" + name + ".x.npy")};
    std::vector<runtime::Tensor> expected;
    for (int i = 0; i < c.at("outputs").get<int>(); ++i)
      expected.push_back(runtime::readNpy(dir + "/" + name + ".y" + std::to_string(i) + ".npy"));
    expectCompiledMatches(model.value(), inputs, expected, name.rfind("conv", 0) == 0 ? 1e-4 : 1e-6, {0, 3});
  }
  // Bad pads: one line naming the node, the model's fault or an unsupported mode.
  auto tooLarge = app::openModel(dir + "/reflect_too_large.onnx");
  ASSERT_FALSE(tooLarge);
  EXPECT_EQ(tooLarge.error().kind, ErrorKind::InvalidModel);
  EXPECT_NE(tooLarge.error().message.find("onnx::Pad: reflect padding (5, 0) of axis 2 must be less than its size 5"),
            std::string::npos)
      << tooLarge.error().message;
  auto unknown = app::openModel(dir + "/unknown_mode.onnx");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().kind, ErrorKind::Unsupported);
  EXPECT_NE(unknown.error().message.find("mode 'mirror' is not supported"), std::string::npos) << unknown.error().message;
}

// --- bad padding on the command line -----------------------------------------------------------

TEST(PadErrors, BadPaddingIsOneLineWithItsExitCode) {
  std::string dir = tempDir("errors");
  runtime::Tensor x = runtime::Tensor::zeros(runtime::DType::Float32, {1, 2, 4});
  std::string in = dir + "/x.npy";
  runtime::writeNpy(in, x);
  struct Case {
    std::string name, forward, needle;
    int exitCode;
  };
  const std::vector<Case> cases = {
      {"TooLarge", "def forward(self, x0):\n  return torch.pad(x0, [4, 0], 'reflect')\n",
       "aten::pad: reflect padding (4, 0) of dimension 2 must be less than its size 4", 3},
      {"Wraps", "def forward(self, x0):\n  return torch.pad(x0, [1, 5], 'circular')\n",
       "aten::pad: circular padding (1, 5) of dimension 2 wraps around more than once", 3},
      {"Mode", "def forward(self, x0):\n  return torch.pad(x0, [1, 1], 'mirror')\n",
       "aten::pad: padding mode 'mirror' is not supported (constant, reflect, replicate, circular)", 4},
      {"OddList", "def forward(self, x0):\n  return torch.constant_pad_nd(x0, [1, 1, 1])\n",
       "aten::constant_pad_nd: 3 padding values do not pad whole axes", 3},
      {"StridedSame", "def forward(self, x0):\n  return torch._convolution_mode(x0, self.w, None, [2], 'same', [1], 1)\n",
       "padding='same' is not supported for strided convolutions", 3},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::string path = importers::testing::saveScriptedModule("PadError" + c.name, c.forward, specOf({{"[1, 2, 4]", f32}}),
                                                              {{"w", torch::randn({2, 2, 3})}});
    testing_support::Outcome o = testing_support::runProcess(
        std::string(KILN_BINARY) + " run " + path + " --input " + in + " --output " + dir + "/y.npy", dir + "/err.txt");
    EXPECT_EQ(o.exitCode, c.exitCode) << o.err;
    EXPECT_FALSE(o.signaled);
    EXPECT_EQ(o.err.rfind("error: ", 0), 0u) << o.err;
    EXPECT_EQ(o.err.find('\n'), o.err.size() - 1) << "one line: " << o.err;
    EXPECT_NE(o.err.find(c.needle), std::string::npos) << o.err;
  }
}

}  // namespace
