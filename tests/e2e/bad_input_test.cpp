// Bad input, clear answer (issue 7): every entry point of the real `kiln` binary and the C API's
// load, given each kind of bad input, answers with one line "error: ..." naming the file and the
// problem, the documented exit code (runtime/error.h), no crash and no hang. The bad files are made
// here (fixed seeds) or are the export script's bad fixtures; the printed matrix (entry point ×
// input → exit code) is the evidence for the issue.
#include <gtest/gtest.h>

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "runtime/c_api.h"
#include "runtime/error.h"
#include "runtime/npy.h"
#include "tests/e2e/process.h"

namespace fs = std::filesystem;
using kiln::ErrorKind;
using kiln::testing_support::Outcome;

namespace {

constexpr int kTimeLimitSeconds = 120;  // a case that takes longer is a hang

// --full (ctest e2e_bad_input_full, label slow): every input in every entry point it applies to.
// Without it each input goes through `kiln run` (and compile), and one input of each kind through
// every entry point.
bool g_full = false;

const std::string& dir() {
  static const std::string d = [] {
    auto p = fs::temp_directory_path() / ("kiln_bad_input_" + std::to_string(::getpid()));
    fs::remove_all(p);
    fs::create_directories(p);
    return p.string();
  }();
  return d;
}

std::string at(const std::string& name) { return dir() + "/" + name; }
std::string model(const std::string& rel) { return std::string(KILN_MODELS_DIR) + "/" + rel; }
std::string quote(const std::string& s) { return "'" + s + "'"; }

std::string readBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void writeBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// ---- the cases ---------------------------------------------------------------------------------

struct Case {
  std::string entry;   // "run", "compile", ... (a column of the matrix)
  std::string input;   // "empty .pt", ... (a row)
  std::string args;    // after `kiln`
  int expected = 0;    // exit code
  std::vector<std::string> needles;  // the line must contain each
  bool warning = false;  // success with one "warning:" line instead of an error
  // filled by run()
  Outcome outcome{};
  double seconds = 0;
};

struct MatrixRow {
  std::string input, entry;
  int expected, got;
  double seconds;
  bool ok;
};
std::mutex g_matrixMutex;
std::vector<MatrixRow> g_matrix;

int code(ErrorKind k) { return static_cast<int>(k); }

/// Runs every case, two processes at a time (the machine is small; each starts libtorch).
void runAll(std::vector<Case>& cases) {
  std::atomic<size_t> next{0};
  auto worker = [&](int id) {
    for (size_t i; (i = next++) < cases.size();) {
      Case& c = cases[i];
      auto start = std::chrono::steady_clock::now();
      c.outcome = kiln::testing_support::runProcess(
          "timeout -k 5 " + std::to_string(kTimeLimitSeconds) + " " + std::string(KILN_BINARY) + " " + c.args +
              " </dev/null",
          at("stderr_" + std::to_string(id) + ".txt"));
      c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
  };
  std::thread a(worker, 0), b(worker, 1);
  a.join();
  b.join();
}

/// The checks every answer to bad input must pass.
void check(const Case& c) {
  const Outcome& o = c.outcome;
  SCOPED_TRACE("kiln " + c.args);
  bool ok = true;
  auto expect = [&](bool cond, const std::string& what) {
    if (!cond) ok = false;
    EXPECT_TRUE(cond) << what << "\nexit " << o.exitCode << ", stderr:\n" << o.err;
  };
  expect(!o.signaled, "crashed");
  expect(o.exitCode != 124 && o.exitCode != 137, "hung (killed after " + std::to_string(kTimeLimitSeconds) + " s)");
  expect(o.exitCode == c.expected, "exit code " + std::to_string(o.exitCode) + ", expected " + std::to_string(c.expected));
  // A warning (a records file with bad lines) is one line too; the command may warn of other things.
  std::string line = o.err.substr(0, o.err.find('\n') + 1);
  if (c.warning) {
    size_t at = o.err.find(c.needles.front());
    size_t begin = at == std::string::npos ? 0 : o.err.rfind('\n', at);
    begin = begin == std::string::npos || at == std::string::npos ? 0 : begin + 1;
    line = at == std::string::npos ? "" : o.err.substr(begin, o.err.find('\n', at) + 1 - begin);
    expect(o.err.find("error: ") == std::string::npos, "a warning case printed an error");
  } else {
    expect(std::count(o.err.begin(), o.err.end(), '\n') == 1, "stderr is not exactly one line");
  }
  expect(!line.empty() && line.back() == '\n', "no complete line on stderr");
  expect(line.rfind(c.warning ? "warning: " : "error: ", 0) == 0, "the line does not start with error:/warning:");
  for (const std::string& n : c.needles) expect(line.find(n) != std::string::npos, "the line does not name '" + n + "'");
  std::lock_guard<std::mutex> lock(g_matrixMutex);
  g_matrix.push_back({c.input, c.entry, c.expected, o.exitCode, c.seconds, ok});
}

void runAndCheck(std::vector<Case>& cases) {
  runAll(cases);
  for (const Case& c : cases) check(c);
}

/// Prints the matrix once every test ran: rows are inputs, columns entry points, cells the exit
/// code (with "!" when a check failed).
class MatrixPrinter : public ::testing::Environment {
 public:
  void TearDown() override {
    std::vector<std::string> entries, inputs;
    std::map<std::pair<std::string, std::string>, std::string> cell;
    double slowest = 0;
    for (const MatrixRow& r : g_matrix) {
      if (std::find(entries.begin(), entries.end(), r.entry) == entries.end()) entries.push_back(r.entry);
      if (std::find(inputs.begin(), inputs.end(), r.input) == inputs.end()) inputs.push_back(r.input);
      cell[{r.input, r.entry}] = std::to_string(r.got) + (r.ok ? "" : "!");
      slowest = std::max(slowest, r.seconds);
    }
    std::printf("\nbad input x entry point -> exit code (! = a check failed; - = not applicable)\n");
    std::printf("%-34s", "input");
    for (const auto& e : entries) std::printf(" %9s", e.c_str());
    std::printf("\n");
    for (const auto& in : inputs) {
      std::printf("%-34s", in.c_str());
      for (const auto& e : entries) {
        auto it = cell.find({in, e});
        std::printf(" %9s", it == cell.end() ? "-" : it->second.c_str());
      }
      std::printf("\n");
    }
    std::printf("%zu cases, slowest %.1f s\n", g_matrix.size(), slowest);
  }
};

// ---- bad files ---------------------------------------------------------------------------------

std::string randomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

uint32_t crc32(const std::string& data) {
  uint32_t crc = 0xffffffffu;
  for (unsigned char byte : data) {
    crc ^= byte;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

/// A valid zip (stored, no compression) of the given entries.
std::string zipOf(const std::vector<std::pair<std::string, std::string>>& entries) {
  auto u16 = [](std::string& s, uint16_t v) { s.push_back(char(v & 0xff)), s.push_back(char(v >> 8)); };
  auto u32 = [&](std::string& s, uint32_t v) { u16(s, uint16_t(v & 0xffff)), u16(s, uint16_t(v >> 16)); };
  std::string body, central;
  for (const auto& [name, data] : entries) {
    uint32_t offset = static_cast<uint32_t>(body.size()), crc = crc32(data), size = static_cast<uint32_t>(data.size());
    body += "PK\x03\x04";
    for (uint16_t v : {20, 0, 0, 0, 0}) u16(body, v);  // version, flags, stored, time, date
    u32(body, crc), u32(body, size), u32(body, size);
    u16(body, uint16_t(name.size())), u16(body, 0);
    body += name + data;
    central += "PK\x01\x02";
    for (uint16_t v : {20, 20, 0, 0, 0, 0}) u16(central, v);
    u32(central, crc), u32(central, size), u32(central, size);
    for (uint16_t v : {uint16_t(name.size()), uint16_t(0), uint16_t(0), uint16_t(0), uint16_t(0)}) u16(central, v);
    u32(central, 0), u32(central, offset);
    central += name;
  }
  std::string out = body + central + "PK\x05\x06";
  u16(out, 0), u16(out, 0), u16(out, uint16_t(entries.size())), u16(out, uint16_t(entries.size()));
  u32(out, static_cast<uint32_t>(central.size())), u32(out, static_cast<uint32_t>(body.size())), u16(out, 0);
  return out;
}

/// A .npy file with a hand-written header (for the malformed and Fortran-ordered cases).
std::string npyWithHeader(const std::string& dict, size_t dataBytes) {
  std::string header = dict;
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(char(header.size() & 0xff));
  out.push_back(char(header.size() >> 8));
  return out + header + std::string(dataBytes, '\0');
}

std::string writeNpy(const std::string& name, kiln::runtime::DType dtype, kiln::runtime::Shape shape) {
  kiln::runtime::Tensor t = kiln::runtime::Tensor::zeros(dtype, shape);
  std::string path = at(name);
  kiln::runtime::writeNpy(path, t);
  return path;
}

// ---- ONNX files, written here as raw protobuf (onnx-ml.proto field numbers) ----

std::string varint(uint64_t v) {
  std::string s;
  for (; v >= 0x80; v >>= 7) s.push_back(static_cast<char>((v & 0x7f) | 0x80));
  s.push_back(static_cast<char>(v));
  return s;
}
std::string pbInt(int field, uint64_t v) { return varint(uint64_t(field) << 3) + varint(v); }
std::string pbBytes(int field, const std::string& payload) {
  return varint(uint64_t(field) << 3 | 2) + varint(payload.size()) + payload;
}

constexpr int kOnnxFloat = 1;  // TensorProto.DataType.FLOAT

/// ValueInfoProto{name, TypeProto{tensor_type{elem_type, shape{dim{dim_value}...}}}}.
std::string onnxValueInfo(const std::string& name, const std::vector<int64_t>& dims) {
  std::string shape;
  for (int64_t d : dims) shape += pbBytes(1, pbInt(1, static_cast<uint64_t>(d)));
  return pbBytes(1, name) + pbBytes(2, pbBytes(1, pbInt(1, kOnnxFloat) + pbBytes(2, shape)));
}

/// TensorProto of floats in raw_data.
std::string onnxTensor(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& values) {
  std::string t;
  for (int64_t d : dims) t += pbInt(1, static_cast<uint64_t>(d));
  std::string raw(values.size() * sizeof(float), '\0');
  std::memcpy(raw.data(), values.data(), raw.size());
  return t + pbInt(2, kOnnxFloat) + pbBytes(8, name) + pbBytes(9, raw);
}

std::string onnxNode(const std::string& op, const std::vector<std::string>& inputs, const std::string& output) {
  std::string n;
  for (const auto& in : inputs) n += pbBytes(1, in);
  return n + pbBytes(2, output) + pbBytes(3, "/" + op) + pbBytes(4, op);
}

/// ModelProto{ir_version 8, producer, graph, opset_import{version}}: Y = OP(X, B), X of
/// [1, 8, 4, 4], B an initializer of [1, 8, 1, 1] unless `withInitializer` is false.
std::string onnxModel(const std::string& op, int64_t opset, bool withInitializer = true) {
  std::vector<float> bias(8);
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = 0.25f * static_cast<float>(i);
  std::string graph = pbBytes(1, onnxNode(op, {"X", "B"}, "Y")) + pbBytes(2, "kiln_bad_input");
  if (withInitializer) graph += pbBytes(5, onnxTensor("B", {1, 8, 1, 1}, bias));
  graph += pbBytes(11, onnxValueInfo("X", {1, 8, 4, 4})) + pbBytes(12, onnxValueInfo("Y", {1, 8, 4, 4}));
  return pbInt(1, 8) + pbBytes(2, "kiln-test") + pbBytes(7, graph) + pbBytes(8, pbInt(2, static_cast<uint64_t>(opset)));
}

/// A well-formed ONNX model (Y = X + B), to run with bad inputs and as the control that the
/// hand-written protobuf is right.
const std::string& goodOnnx() {
  static const std::string path = [] {
    writeBytes(at("add.onnx"), onnxModel("Add", 13));
    return at("add.onnx");
  }();
  return path;
}

/// The bad model files every model-taking subcommand is tried on: {label, path, exit code, needles}.
struct BadModel {
  std::string label, path;
  int expected;
  std::vector<std::string> needles;
  kiln::runtime::Shape inputShape;  // a well-formed input for `kiln run`
  bool everyEntry = false;          // tried in every subcommand even without --full
};

std::vector<BadModel> badModels() {
  const std::string good = readBytes(model("ops/conv_bn_relu.pt"));
  writeBytes(at("empty.pt"), "");
  writeBytes(at("random.pt"), randomBytes(4096, 7));
  writeBytes(at("truncated_half.pt"), good.substr(0, good.size() / 2));
  writeBytes(at("truncated_tail.pt"), good.substr(0, good.size() - 10));
  writeBytes(at("plain_zip.pt"), zipOf({{"archive/hello.txt", "not a model\n"}}));
  writeBytes(at("torch_save.pt"), zipOf({{"archive/data.pkl", "\x80\x02}q\x00."}, {"archive/version", "3\n"}}));
  const std::string notTs = "not a TorchScript archive";
  const int invalid = code(ErrorKind::InvalidModel), unsupported = code(ErrorKind::Unsupported);
  kiln::runtime::Shape s{1, 8, 16, 16};
  return {
      {"empty .pt", at("empty.pt"), invalid, {"empty.pt: ", "empty file"}, s, true},
      {"random bytes .pt", at("random.pt"), invalid, {"random.pt: ", notTs, "not a zip file"}, s},
      {"truncated .pt (half)", at("truncated_half.pt"), invalid, {"truncated_half.pt: ", notTs, "truncated"}, s},
      {"truncated .pt (last 10 bytes)", at("truncated_tail.pt"), invalid, {"truncated_tail.pt: ", notTs}, s},
      {"zip that is not TorchScript", at("plain_zip.pt"), invalid, {"plain_zip.pt: ", notTs, "constants.pkl"}, s},
      {"torch.save zip (not jit)", at("torch_save.pt"), invalid, {"torch_save.pt: ", notTs, "torch.jit.save"}, s},
      {"text file .pt (fixture)", model("bad/not_a_model.pt"), invalid, {"not_a_model.pt: ", notTs}, s},
      {"missing file", at("no_such_model.pt"), code(ErrorKind::Io), {"no_such_model.pt: ", "no such file"}, s},
      {"unsupported op", model("bad/unsupported_op.pt"), unsupported,
       {"unsupported_op.pt: ", "aten::grid_sampler is not supported", ".py:"}, {1, 4, 8, 8}, true},
      {"scripted if whose branches' shapes differ", model("bad/control_flow_if.pt"), unsupported,
       {"control_flow_if.pt: ", "prim::If", "shapes depend on the data", "export_models.py:"}, {2, 8}, true},
      {"scripted loop whose carried tensor grows", model("bad/control_flow_loop.pt"), unsupported,
       {"control_flow_loop.pt: ", "prim::Loop", "shapes depend on the data", "export_models.py:"}, {2, 8}},
  };
}

/// The same for `.onnx` files (importers/onnx): the import is picked by the extension. Without
/// --full they go through `kiln run` only.
std::vector<BadModel> badOnnxModels() {
  const std::string real = readBytes(model("onnx/transformer_encoder.onnx"));
  writeBytes(at("empty.onnx"), "");
  writeBytes(at("random.onnx"), randomBytes(4096, 17));
  writeBytes(at("truncated.onnx"), real.substr(0, real.size() / 2));
  // Valid protobuf, but not a model: a TensorProto, and a ModelProto without its graph.
  writeBytes(at("tensor.onnx"), onnxTensor("W", {2, 2}, {1, 2, 3, 4}));
  writeBytes(at("no_graph.onnx"), pbInt(1, 8) + pbBytes(2, "kiln-test") + pbBytes(8, pbInt(2, 13)));
  writeBytes(at("opset_99.onnx"), onnxModel("Add", 99));
  writeBytes(at("no_initializer.onnx"), onnxModel("Add", 13, false));
  const int invalid = code(ErrorKind::InvalidModel), unsupported = code(ErrorKind::Unsupported);
  const std::string notOnnx = "not an ONNX model";
  kiln::runtime::Shape s{1, 8, 4, 4};
  return {
      {"empty .onnx", at("empty.onnx"), invalid, {"empty.onnx: ", notOnnx, "empty file"}, s},
      {"random bytes .onnx", at("random.onnx"), invalid, {"random.onnx: ", notOnnx}, s},
      {"truncated .onnx (half)", at("truncated.onnx"), invalid, {"truncated.onnx: ", notOnnx}, s},
      {"protobuf, not a model (.onnx)", at("tensor.onnx"), invalid, {"tensor.onnx: ", notOnnx}, s},
      {"ModelProto without graph", at("no_graph.onnx"), invalid, {"no_graph.onnx: ", notOnnx, "no graph"}, s},
      {"unsupported op (.onnx fixture)", model("bad/unsupported_op.onnx"), unsupported,
       {"unsupported_op.onnx: ", "onnx::CumSum is not supported", "node \"/CumSum\""}, {1, 4, 8, 8}},
      {"opset 99 (.onnx)", at("opset_99.onnx"), unsupported, {"opset_99.onnx: ", "opset 99 is not supported"}, s},
      {"missing initializer (.onnx)", at("no_initializer.onnx"), invalid,
       {"no_initializer.onnx: ", "onnx::Add", "'B' is not defined"}, s},
  };
}

/// A compiled module directory of ops/relu.pt, made once.
const std::string& exportedModule() {
  static const std::string path = [] {
    std::string out = at("relu_module");
    Outcome o = kiln::testing_support::runProcess(
        std::string(KILN_BINARY) + " compile " + model("ops/relu.pt") + " -o " + out, at("compile_err.txt"));
    EXPECT_EQ(o.exitCode, 0) << o.err;
    return out;
  }();
  return path;
}

std::string copyModule(const std::string& name) {
  std::string to = at(name);
  fs::remove_all(to);
  fs::copy(exportedModule(), to, fs::copy_options::recursive);
  return to;
}

std::string moduleWithVersion(const std::string& name, const std::string& version) {
  std::string dir = copyModule(name);
  std::string graph = readBytes(dir + "/graph.txt");
  graph.replace(0, graph.find('\n'), "kiln-module " + version);
  writeBytes(dir + "/graph.txt", graph);
  return dir;
}

// ---- the tests ---------------------------------------------------------------------------------

TEST(BadInput, ModelFilesInEverySubcommand) {
  std::vector<Case> cases;
  std::vector<BadModel> models = badModels();
  for (BadModel& m : badOnnxModels()) models.push_back(std::move(m));
  for (const BadModel& m : models) {
    std::string in = writeNpy("in_" + std::to_string(cases.size()) + ".npy", kiln::runtime::DType::Float32,
                              m.inputShape);
    const std::string p = quote(m.path);
    const std::vector<std::pair<std::string, std::string>> commands{
        {"run", "run " + p + " --input " + in},
        {"compile", "compile " + p + " -o " + at("out_module")},
        {"ir", "ir " + p + " --stage graph"},
        {"compare", "compare " + p + " --repeat 1 --no-torch-compile --no-store"},
        {"profile", "profile " + p + " --repeat 1 --warmup 0 --no-store"},
        {"sweep", "sweep " + p + " --batches 1 --backends kiln --repeat 1 --budget 5 --no-store"},
        {"tune", "tune " + p + " --list-tasks --no-store"},
        {"doctor", "doctor " + p},
    };
    for (const auto& [entry, args] : commands) {
      // The doctor's report is its product: an unsupported model is reported, not an error.
      if (entry == "doctor" && m.expected == code(ErrorKind::Unsupported)) continue;
      if (!g_full && !m.everyEntry && entry != "run" && entry != "compile") continue;
      // `kiln run` and `kiln compile` share the import path: ONNX files take one (time budget).
      if (!g_full && m.path.size() > 5 && m.path.substr(m.path.size() - 5) == ".onnx" && entry != "run") continue;
      cases.push_back({entry, m.label, args, m.expected, m.needles});
    }
  }
  runAndCheck(cases);
}

TEST(BadInput, DoctorReportsUnsupportedAndControlFlowModels) {
  for (const char* rel : {"bad/unsupported_op.pt", "bad/control_flow_if.pt", "bad/control_flow_loop.pt"}) {
    Outcome o = kiln::testing_support::runProcess(std::string(KILN_BINARY) + " doctor " + model(rel), at("doc.txt"));
    EXPECT_EQ(o.exitCode, 0) << rel << ": " << o.err;
    EXPECT_NE(o.out.find("not importable"), std::string::npos) << o.out;
  }
}

TEST(BadInput, NpyInputsToAModelAndToAnExportedModule) {
  using kiln::runtime::DType;
  const std::string fortran = at("fortran.npy"), badMagic = at("bad_magic.npy"), shortHeader = at("short_header.npy"),
                    shortData = at("short_data.npy"), noShape = at("no_shape.npy"), complex = at("complex.npy");
  writeBytes(fortran, npyWithHeader("{'descr': '<f4', 'fortran_order': True, 'shape': (1, 8, 16, 16), }", 8192));
  writeBytes(badMagic, "this is text, not an array\n");
  writeBytes(shortHeader, std::string("\x93NUMPY\x01\x00\x76\x00{'descr'", 17));
  writeBytes(shortData, npyWithHeader("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 8, 16, 16), }", 100));
  writeBytes(noShape, npyWithHeader("{'descr': '<f4', 'fortran_order': False, }", 16));
  writeBytes(complex, npyWithHeader("{'descr': '<c8', 'fortran_order': False, 'shape': (1, 8, 16, 16), }", 16384));
  const std::string f64 = writeNpy("f64.npy", DType::Float64, {1, 8, 16, 16});
  const std::string good = writeNpy("good.npy", DType::Float32, {1, 8, 16, 16});
  const std::string channels = writeNpy("channels.npy", DType::Float32, {1, 3, 16, 16});
  const std::string rank = writeNpy("rank.npy", DType::Float32, {8, 16, 16});
  const int bad = code(ErrorKind::InvalidInput);
  struct NpyCase {
    std::string label, inputs;
    int expected;
    std::vector<std::string> needles;
  };
  const std::vector<NpyCase> npys{
      {"Fortran-ordered .npy", fortran, bad, {"fortran.npy: ", "Fortran-ordered"}},
      {".npy with bad magic", badMagic, bad, {"bad_magic.npy: ", "not a .npy file"}},
      {".npy with a truncated header", shortHeader, bad, {"short_header.npy: ", "truncated .npy header"}},
      {".npy with truncated data", shortData, bad, {"short_data.npy: ", "truncated .npy data"}},
      {".npy header without shape", noShape, bad, {"no_shape.npy: ", "'shape'"}},
      {".npy of complex64", complex, bad, {"complex.npy: ", "unsupported .npy dtype"}},
      {"missing .npy", at("missing.npy"), code(ErrorKind::Io), {"missing.npy: ", "cannot open"}},
      {"wrong dtype (f64 for f32)", f64, bad, {"f64.npy: ", "f64", "f32"}},
      {"wrong shape (3 channels for 8)", channels, bad, {"channels.npy: ", "[1,3,16,16]"}},
      {"wrong rank", rank, bad, {"rank.npy: ", "[8,16,16]"}},
      {"wrong count (2 for 1)", good + " --input " + good, bad, {"1 input", "got 2"}},
  };
  std::vector<Case> cases;
  const std::string module = exportedModule();
  // The exported module is of ops/relu.pt, [1, 8, 16, 16] as well.
  for (const NpyCase& n : npys) {
    cases.push_back({"run", n.label, "run " + model("ops/conv_bn_relu.pt") + " --input " + n.inputs, n.expected, n.needles});
    std::vector<std::string> moduleNeedles = n.needles;
    if (n.label.rfind("wrong", 0) == 0) moduleNeedles = {"relu_module: "};  // the runtime names the module
    cases.push_back({"run dir", n.label, "run " + module + " --input " + n.inputs, n.expected, moduleNeedles});
  }
  runAndCheck(cases);
}

TEST(BadInput, NpyInputsToAnOnnxModel) {
  using kiln::runtime::DType;
  const std::string m = goodOnnx();
  const std::string good = writeNpy("onnx_good.npy", DType::Float32, {1, 8, 4, 4});
  const int bad = code(ErrorKind::InvalidInput);
  // The control: the hand-written model is a valid one, and runs.
  Outcome ok = kiln::testing_support::runProcess(std::string(KILN_BINARY) + " run " + m + " --input " + good,
                                                 at("onnx_ok.txt"));
  ASSERT_EQ(ok.exitCode, 0) << ok.err;
  EXPECT_NE(ok.out.find("output 0: f32[1,8,4,4]"), std::string::npos) << ok.out;
  std::vector<Case> cases{
      {"run", "onnx: wrong shape (3 channels for 8)", "run " + m + " --input " + writeNpy("onnx_c3.npy", DType::Float32, {1, 3, 4, 4}),
       bad, {"add.onnx: ", "input 'X'", "[1,3,4,4]", "[1,8,4,4]"}},
      {"run", "onnx: wrong rank", "run " + m + " --input " + writeNpy("onnx_rank.npy", DType::Float32, {8, 4, 4}), bad,
       {"add.onnx: ", "input 'X'", "[8,4,4]", "[1,8,4,4]"}},
      {"run", "onnx: wrong dtype (f64 for f32)", "run " + m + " --input " + writeNpy("onnx_f64.npy", DType::Float64, {1, 8, 4, 4}),
       bad, {"add.onnx: ", "f64", "f32"}},
      {"run", "onnx: wrong count (2 for 1)", "run " + m + " --input " + good + " --input " + good, bad,
       {"add.onnx: ", "1 input", "2"}},
  };
  runAndCheck(cases);
}

TEST(BadInput, UnknownTargets) {
  const std::string in = writeNpy("target_in.npy", kiln::runtime::DType::Float32, {1, 8, 16, 16});
  const std::string m = model("ops/conv_bn_relu.pt");
  const int unknown = code(ErrorKind::UnknownTarget);
  struct TargetCase {
    std::string label, spec;
    std::vector<std::string> needles;
  };
  const std::vector<TargetCase> targets{
      {"target 'llvm -mcpu=nosuchcpu'", "llvm -mcpu=nosuchcpu", {"unknown target 'llvm -mcpu=nosuchcpu'", "-mcpu=help"}},
      {"target 'tvm'", "tvm", {"unknown target 'tvm'", "expected \"llvm"}},
      {"target 'llvm -mattr=+nosuch'", "llvm -mattr=+nosuch", {"unknown target", "+nosuch"}},
      {"target 'llvm -O3' (bad option)", "llvm -O3", {"unknown target", "-O3"}},
      {"target with unknown triple", "llvm -mtriple=potato-unknown-nowhere", {"unknown target", "potato"}},
  };
  std::vector<Case> cases;
  for (const TargetCase& t : targets) {
    const std::string flag = " --target " + quote(t.spec);
    for (const auto& [entry, args] : std::vector<std::pair<std::string, std::string>>{
             {"run", "run " + m + " --input " + in},
             {"compile", "compile " + m + " -o " + at("target_module")},
             {"ir", "ir " + m + " --stage lowered"},
             {"compare", "compare " + m + " --repeat 1 --no-torch-compile --no-store"},
             {"profile", "profile " + m + " --repeat 1 --warmup 0 --no-store"},
             {"sweep", "sweep " + m + " --batches 1 --backends kiln --repeat 1 --no-store"},
             {"tune", "tune " + m + " --list-tasks --no-store"}}) {
      if (!g_full && entry != "run" && &t != &targets.front()) continue;
      cases.push_back({entry, t.label, args + flag, unknown, t.needles});
    }
  }
  // A cross target is valid but cannot run here: a usage error, named.
  cases.push_back({"run", "cross target (aarch64) for run", "run " + m + " --input " + in +
                                                             " --target 'llvm -mtriple=aarch64-linux-gnu'",
                   code(ErrorKind::Usage), {"cross-compilation"}});
  runAndCheck(cases);
}

TEST(BadInput, TuningRecordsFiles) {
  const std::string m = model("ops/conv_bn_relu.pt");
  const std::string in = writeNpy("records_in.npy", kiln::runtime::DType::Float32, {1, 8, 16, 16});
  // Real records from a short tuning run, then the same file with bad lines mixed in.
  const std::string good = at("good_records.json");
  Outcome tuned = kiln::testing_support::runProcess(
      std::string(KILN_BINARY) + " tune " + m + " --trials 2 --tuner random --no-compare --no-store --records " + good,
      at("tune_err.txt"));
  ASSERT_EQ(tuned.exitCode, 0) << tuned.err;
  const std::string goodText = readBytes(good);
  ASSERT_FALSE(goodText.empty());
  const std::string mixed = at("mixed_records.json");
  writeBytes(mixed, "{not json\n" + goodText + "\x01\x02\x03 binary junk\n{\"key\": 42}\n");
  const std::string garbage = at("garbage_records.json");
  writeBytes(garbage, randomBytes(2000, 11));
  fs::create_directories(at("records_dir"));

  std::vector<Case> cases;
  for (const auto& [entry, args] : std::vector<std::pair<std::string, std::string>>{
           {"run", "run " + m + " --input " + in},
           {"compile", "compile " + m + " -o " + at("records_module")},
           {"ir", "ir " + m + " --stage lowered"},
           {"profile", "profile " + m + " --repeat 1 --warmup 0 --no-store"}}) {
    if (!g_full && entry != "run" && entry != "ir") continue;
    cases.push_back({entry, "records: random bytes", args + " --records " + garbage, code(ErrorKind::InvalidInput),
                     {"garbage_records.json: ", "not a tuning-records file"}});
    cases.push_back({entry, "records: a directory", args + " --records " + at("records_dir"), code(ErrorKind::Io),
                     {"records_dir: ", "directory"}});
    cases.push_back({entry, "records: missing file", args + " --records " + at("nope.json"), code(ErrorKind::Io),
                     {"nope.json: ", "no such"}});
    cases.push_back({entry, "records: 3 bad lines among good", args + " --records " + mixed, 0,
                     {"mixed_records.json: ", "skipped 3 bad line(s)", "line 1: "}, true});
  }
  cases.push_back({"tune", "records: random bytes", "tune " + m + " --trials 1 --no-compare --no-store --records " + garbage,
                   code(ErrorKind::InvalidInput), {"garbage_records.json: ", "not a tuning-records file"}});
  runAndCheck(cases);
  EXPECT_EQ(readBytes(garbage), randomBytes(2000, 11)) << "tune must not append to a file that is not a records file";

  // The good records of the mixed file are used: the lowered kernels carry the tuned knobs.
  auto lowered = [&](const std::string& records) {
    return kiln::testing_support::runProcess(
        std::string(KILN_BINARY) + " ir " + m + " --stage lowered" + (records.empty() ? "" : " --records " + records),
        at("ir_err.txt"));
  };
  Outcome withGood = lowered(good), withMixed = lowered(mixed);
  ASSERT_EQ(withGood.exitCode, 0) << withGood.err;
  ASSERT_EQ(withMixed.exitCode, 0) << withMixed.err;
  EXPECT_EQ(withMixed.out, withGood.out);
}

TEST(BadInput, SessionStores) {
  const std::string m = model("ops/relu.pt");
  // A real store, then the same file claiming a newer schema.
  const std::string newer = at("newer.db");
  Outcome made = kiln::testing_support::runProcess(
      std::string(KILN_BINARY) + " profile " + m + " --repeat 1 --warmup 0 --db " + newer, at("profile_err.txt"));
  ASSERT_EQ(made.exitCode, 0) << made.err;
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(newer.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "PRAGMA journal_mode=DELETE; PRAGMA user_version = 99", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  const std::string text = at("notes.db"), other = at("other_app.db"), corrupt = at("corrupt.db");
  writeBytes(text, "these are my notes, not a database\n");
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(other.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE contacts(name TEXT); INSERT INTO contacts VALUES('ada');", nullptr,
                           nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  std::string header("SQLite format 3\0", 16);
  writeBytes(corrupt, header + randomBytes(8192 - 16, 5));
  fs::create_directories(at("db_dir"));
  std::map<std::string, std::string> before;
  for (const std::string& f : {newer, text, other, corrupt}) before[f] = readBytes(f);

  const int store = code(ErrorKind::Store);
  struct DbCase {
    std::string label, path;
    int expected;
    std::vector<std::string> needles;
  };
  const std::vector<DbCase> dbs{
      {"text file named .db", text, store, {"notes.db: ", "not a SQLite database"}},
      {"newer schema (user_version 99)", newer, store, {"newer.db: ", "newer Kiln", "99", "refusing to modify"}},
      {"another application's SQLite", other, store, {"other_app.db: ", "not a Kiln session store"}},
      {"corrupt SQLite (bad pages)", corrupt, store, {"corrupt.db: "}},
      {"a directory as --db", at("db_dir"), code(ErrorKind::Io), {"db_dir: ", "directory"}},
  };
  std::vector<Case> cases;
  for (const DbCase& d : dbs) {
    const std::string flag = " --db " + d.path;
    for (const auto& [entry, args] : std::vector<std::pair<std::string, std::string>>{
             {"sessions", "sessions list"},
             {"sessions show", "sessions show 1"},
             {"report", "report 1 --csv " + at("report.csv")},
             {"profile", "profile " + m + " --repeat 1 --warmup 0"},
             {"compare", "compare " + m + " --repeat 1 --no-torch-compile"},
             {"sweep", "sweep " + m + " --batches 1 --backends kiln --repeat 1"},
             {"run --records", "ir " + m + " --stage lowered --records"}}) {
      // --records takes the store as its value.
      if (!g_full && entry != "sessions" && &d != &dbs[1]) continue;
      std::string full = entry == "run --records" ? args + " " + d.path : args + flag;
      cases.push_back({entry == "run --records" ? "ir --records" : entry, d.label, full, d.expected, d.needles});
    }
  }
  runAndCheck(cases);
  for (const auto& [path, bytes] : before) EXPECT_EQ(readBytes(path), bytes) << path << " was modified";
  EXPECT_FALSE(fs::exists(text + "-wal"));
  EXPECT_FALSE(fs::exists(newer + "-wal") && fs::file_size(newer + "-wal") > 0);
}

TEST(BadInput, ExportedModules) {
  const std::string in = writeNpy("module_in.npy", kiln::runtime::DType::Float32, {1, 8, 16, 16});
  const std::string version = moduleWithVersion("version_99", "99");
  const std::string noGraph = copyModule("no_graph");
  fs::remove(noGraph + "/graph.txt");
  const std::string badLib = copyModule("bad_library");
  writeBytes(badLib + "/kernels.so", randomBytes(4096, 3));
  const std::string shortParams = copyModule("short_params");
  {
    std::string p = readBytes(shortParams + "/params.bin");
    writeBytes(shortParams + "/params.bin", p.substr(0, p.size() / 2));
  }
  const std::string cross = at("aarch64_module");
  Outcome c = kiln::testing_support::runProcess(std::string(KILN_BINARY) + " compile " + model("ops/relu.pt") +
                                                    " --target 'llvm -mtriple=aarch64-linux-gnu' -o " + cross,
                                                at("cross_err.txt"));
  ASSERT_EQ(c.exitCode, 0) << c.err;
  std::vector<Case> cases{
      {"run dir", "module of format version 99", "run " + version + " --input " + in,
       code(ErrorKind::IncompatibleModule), {"version_99: ", "module format version 99", "recompile"}},
      {"run dir", "module compiled for aarch64", "run " + cross + " --input " + in,
       code(ErrorKind::IncompatibleModule), {"aarch64_module: ", "aarch64"}},
      {"run dir", "module without graph.txt", "run " + noGraph + " --input " + in, code(ErrorKind::InvalidModel),
       {"no_graph: ", "graph.txt"}},
      {"run dir", "module with random kernels.so", "run " + badLib + " --input " + in, code(ErrorKind::InvalidModel),
       {"kernels.so"}},
      {"run dir", "module with truncated params.bin", "run " + shortParams + " --input " + in,
       code(ErrorKind::InvalidModel), {"params.bin"}},
  };
  runAndCheck(cases);

  // The C API's load answers the same, with the same codes, and never aborts.
  struct CCase {
    std::string label, path;
    int status;
    std::string needle;
  };
  const std::vector<CCase> ccases{
      {"module of format version 99", version, KILN_ERROR_INCOMPATIBLE_MODULE, "module format version 99"},
      {"module compiled for aarch64", cross, KILN_ERROR_INCOMPATIBLE_MODULE, "aarch64"},
      {"module without graph.txt", noGraph, KILN_ERROR_INVALID_MODEL, "graph.txt"},
      {"module with random kernels.so", badLib, KILN_ERROR_INVALID_MODEL, "kernels.so"},
      {"module with truncated params.bin", shortParams, KILN_ERROR_INVALID_MODEL, "params.bin"},
      {"missing module directory", at("no_such_module"), KILN_ERROR_IO, "no such module directory"},
      {"a model file, not a module", model("ops/relu.pt"), KILN_ERROR_INVALID_MODEL, "not a module directory"},
  };
  for (const CCase& cc : ccases) {
    KilnModule* module = reinterpret_cast<KilnModule*>(0x1);
    char buf[512];
    int status = kiln_module_load(cc.path.c_str(), &module, buf, sizeof buf);
    EXPECT_EQ(status, cc.status) << cc.label << ": " << buf;
    EXPECT_EQ(module, nullptr) << cc.label;
    EXPECT_NE(std::string(buf).find(cc.needle), std::string::npos) << cc.label << ": " << buf;
    EXPECT_STREQ(kiln_last_error(), buf) << cc.label;
    EXPECT_EQ(std::string(buf).find('\n'), std::string::npos) << cc.label << ": " << buf;
    std::lock_guard<std::mutex> lock(g_matrixMutex);
    g_matrix.push_back({cc.label, "C load", cc.status, status, 0, status == cc.status});
  }
  KilnModule* module = nullptr;
  EXPECT_EQ(kiln_module_load(nullptr, &module, nullptr, 0), KILN_ERROR_USAGE);
  EXPECT_EQ(kiln_module_load(version.c_str(), nullptr, nullptr, 0), KILN_ERROR_USAGE);
}

TEST(BadInput, CommandLineUsage) {
  const std::string m = model("ops/relu.pt");
  const int usage = code(ErrorKind::Usage);
  std::vector<Case> cases{
      {"kiln", "no subcommand", "", usage, {"subcommand"}},
      {"kiln", "unknown subcommand", "frobnicate", usage, {"frobnicate"}},
      {"run", "missing --input", "run " + m, usage, {"--input"}},
      {"run", "unknown flag", "run " + m + " --input x.npy --frobnicate", usage, {"--frobnicate"}},
      {"run", "opt level 9", "run " + m + " --input x.npy -O9", usage, {"opt-level"}},
      {"ir", "unknown stage", "ir " + m + " --stage nonsense", usage, {"unknown stage 'nonsense'"}},
      {"compare", "unknown backend", "compare " + m + " --backends nosuch --no-store", usage,
       {"unknown backend 'nosuch'"}},
  };
  // A malformed --input-shapes is refused by every command that opens a model, before it does.
  const std::string shapes = " --input-shapes \"x:[1,8,16\"";
  for (const auto& [entry, args] : std::vector<std::pair<std::string, std::string>>{
           {"run", "run " + m + " --input x.npy"},
           {"compile", "compile " + m + " -o " + at("out_shapes")},
           {"ir", "ir " + m},
           {"compare", "compare " + m + " --no-store"},
           {"profile", "profile " + m + " --no-store"},
           {"sweep", "sweep " + m + " --no-store"},
           {"tune", "tune " + m + " --list-tasks --no-store"},
           {"doctor", "doctor " + m}})
    cases.push_back({entry, "malformed --input-shapes", args + shapes, usage, {"--input-shapes: missing ']'"}});
  cases.push_back({"ir", "--input-shapes naming no input", "ir " + m + " --input-shapes \"nosuch:[1,8,16,16]\"",
                   code(ErrorKind::InvalidInput), {"no input 'nosuch'"}});
  runAndCheck(cases);
}

TEST(BadInput, HelpDocumentsTheExitCodes) {
  Outcome o = kiln::testing_support::runProcess(std::string(KILN_BINARY) + " --help", at("help_err.txt"));
  EXPECT_EQ(o.exitCode, 0);
  for (const char* line : {"2 usage", "3 not a model", "4 unsupported", "5 bad inputs", "8 unknown target",
                           "9 exported module of another version", "10 session store"})
    EXPECT_NE(o.out.find(line), std::string::npos) << line << "\n" << o.out;
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i) g_full = g_full || std::string(argv[i]) == "--full";
  ::testing::AddGlobalTestEnvironment(new MatrixPrinter);
  int rc = RUN_ALL_TESTS();
  std::error_code ec;
  fs::remove_all(dir(), ec);
  return rc;
}
