// Recurrent networks (issue 18): nn.LSTM, nn.GRU and nn.RNN (tanh and relu) modules (single and
// multi-layer, bidirectional, batch_first, with and without initial states) traced and saved by
// today's torch in Kiln's Python environment, imported (aten::lstm / gru / rnn_tanh / rnn_relu
// unrolled over time), compiled at
// -O0, -O2 and -O3 and run, against libtorch running the same file on the same inputs. Skips with
// a message only when that environment is missing (CI has it).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "app/facade.h"
#include "profiler/torch_baseline.h"
#include "runtime/tensor_values.h"
#include "tests/e2e/expect_matches.h"
#include "tests/e2e/process.h"

using namespace kiln;

namespace {

const char* kTraceScript = R"(import json, sys
import torch
import torch.nn as nn

torch.manual_seed(0)


class Lstm2Bi(nn.Module):  # two layers, bidirectional, batch_first, zero initial states
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(8, 16, num_layers=2, bidirectional=True, batch_first=True)

    def forward(self, x):
        y, (h, c) = self.rnn(x)
        return y, h, c


class LstmStates(nn.Module):  # one layer, time-major, initial states as inputs, a head on the last step
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(8, 10)
        self.head = nn.Linear(10, 3)

    def forward(self, x, h0, c0):
        y, (h, c) = self.rnn(x, (h0, c0))
        return self.head(y[-1]), h, c


class GruBi(nn.Module):  # GRU: two layers, bidirectional, time-major, initial state as input
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(8, 12, num_layers=2, bidirectional=True)

    def forward(self, x, h0):
        return self.rnn(x, h0)


class GruBatchFirst(nn.Module):  # GRU: one layer, batch_first, no bias, zero initial state
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(8, 6, batch_first=True, bias=False)

    def forward(self, x):
        return self.rnn(x)[0]


class RnnTanh(nn.Module):  # Elman RNN, tanh: two layers, bidirectional, batch_first, initial state
    def __init__(self):
        super().__init__()
        self.rnn = nn.RNN(8, 10, num_layers=2, bidirectional=True, batch_first=True)

    def forward(self, x, h0):
        return self.rnn(x, h0)


class RnnRelu(nn.Module):  # Elman RNN, relu: one layer, time-major, no bias, zero initial state
    def __init__(self):
        super().__init__()
        self.rnn = nn.RNN(8, 6, nonlinearity="relu", bias=False)

    def forward(self, x):
        return self.rnn(x)[0]


out = sys.argv[1]
cases = {
    "lstm2bi": (Lstm2Bi(), [("x", [2, 7, 8])]),
    "lstm_states": (LstmStates(), [("x", [5, 3, 8]), ("h0", [1, 3, 10]), ("c0", [1, 3, 10])]),
    "gru_bi": (GruBi(), [("x", [6, 2, 8]), ("h0", [4, 2, 12])]),
    "gru_batch_first": (GruBatchFirst(), [("x", [3, 5, 8])]),
    "rnn_tanh": (RnnTanh(), [("x", [2, 4, 8]), ("h0", [4, 2, 10])]),
    "rnn_relu": (RnnRelu(), [("x", [5, 3, 8])]),
}
for name, (module, inputs) in cases.items():
    module.eval()
    example = tuple(torch.randn(*shape) for _, shape in inputs)
    traced = torch.jit.trace(module, example)
    spec = {"inputs": [{"name": n, "shape": s, "dtype": "float32"} for n, s in inputs], "source": "recurrent_test"}
    torch.jit.save(traced, f"{out}/{name}.pt", _extra_files={"kiln.json": json.dumps(spec)})
print(" ".join(cases))
)";

TEST(Recurrent, LstmGruAndRnnTracedByTodaysTorchMatchLibtorch) {
  if (!std::filesystem::exists(KILN_PYENV_PYTHON))
    GTEST_SKIP() << "Kiln's Python environment (" << KILN_PYENV_PYTHON << ") is missing: run scripts/install-deps.sh";
  std::string dir = ::testing::TempDir() + "kiln_recurrent";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/trace.py") << kTraceScript;
  testing_support::Outcome o =
      testing_support::runProcess(std::string(KILN_PYENV_PYTHON) + " " + dir + "/trace.py " + dir, dir + "/err.txt");
  ASSERT_EQ(o.exitCode, 0) << o.err;
  std::istringstream names(o.out);
  int cases = 0;
  for (std::string name; names >> name; ++cases) {
    SCOPED_TRACE(name);
    std::string path = dir + "/" + name + ".pt";
    auto model = app::openModel(path);
    ASSERT_TRUE(model) << model.error().message;
    std::vector<runtime::Tensor> inputs = app::randomInputs(*model.value(), 5);
    profiler::TorchModel torchModel(path, profiler::TorchMode::Eager, 1);
    std::vector<runtime::Tensor> expected = torchModel.run(inputs);
    for (int opt : {0, 2, 3}) {
      app::BuildOptions options;
      options.optLevel = opt;
      options.threads = 2;
      options.verifyPasses = true;
      auto compiled = app::build(model.value(), options);
      ASSERT_TRUE(compiled) << "-O" << opt << ": " << compiled.error().message;
      auto outputs = app::run(*compiled.value(), inputs);
      ASSERT_TRUE(outputs) << "-O" << opt << ": " << outputs.error().message;
      EXPECT_EQ(testing_support::firstDifference(outputs.value(), expected, 1e-4), "") << "-O" << opt;
    }
  }
  EXPECT_EQ(cases, 6);
}

}  // namespace
