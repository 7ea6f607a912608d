// graph.txt and params.bin of an exported module: writer and strict reader (format in module.h).
#include "runtime/module.h"

#include <bit>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "runtime/error.h"

namespace kiln::runtime {
namespace {

namespace fs = std::filesystem;

static_assert(std::endian::native == std::endian::little, "module files are little-endian");

constexpr char kParamsMagic[8] = {'K', 'I', 'L', 'N', 'P', 'R', 'M', '1'};
constexpr size_t kParamsHeaderBytes = 16;
constexpr size_t kParamsAlign = 64;

std::string escape(std::string_view s) {
  if (s.empty()) return "%";
  std::string out;
  for (unsigned char c : s) {
    if (c > ' ' && c <= '~' && c != '%') {
      out += static_cast<char>(c);
      continue;
    }
    char buf[4];
    std::snprintf(buf, sizeof buf, "%%%02X", c);
    out += buf;
  }
  return out;
}

int hexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<std::string> unescape(std::string_view s) {
  if (s == "%") return std::string();
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) return std::nullopt;
    int hi = hexDigit(s[i + 1]), lo = hexDigit(s[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

uint64_t fnv1a64(const unsigned char* data, size_t n, uint64_t h = 0xcbf29ce484222325ull) {
  for (size_t i = 0; i < n; ++i) {
    h ^= data[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

size_t alignUp(size_t n) { return (n + kParamsAlign - 1) / kParamsAlign * kParamsAlign; }

std::string_view slotKindName(SlotKind kind) {
  switch (kind) {
    case SlotKind::Input: return "input";
    case SlotKind::Constant: return "constant";
    case SlotKind::Intermediate: return "intermediate";
  }
  return "?";
}

std::string joinInts(const std::vector<int>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s.empty() ? "-" : s;
}

void writeFile(const fs::path& path, const std::string& bytes) {
  fs::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(path.string() + ": cannot write file", ErrorKind::Io);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw Error(path.string() + ": write failed", ErrorKind::Io);
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw Error(path.string() + ": cannot write file: " + ec.message(), ErrorKind::Io);
}

// ---- reading ---------------------------------------------------------------------------------

/// One graph.txt line split into tokens, with a position for error messages.
class Line {
 public:
  Line(std::string file, int number, std::string text) : m_file(std::move(file)), m_number(number), m_text(std::move(text)) {
    std::istringstream in(m_text);
    std::string tok;
    while (in >> tok) m_tokens.push_back(tok);
  }
  const std::string& keyword() const { return m_tokens.front(); }
  size_t size() const { return m_tokens.size(); }
  /// The text after the keyword and one space.
  std::string rest() const { return m_text.size() > keyword().size() ? m_text.substr(keyword().size() + 1) : ""; }

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(m_file + ":" + std::to_string(m_number) + ": " + what, ErrorKind::InvalidModel);
  }
  void expectFields(size_t n) const {
    if (m_tokens.size() != n + 1)
      fail("'" + keyword() + "' expects " + std::to_string(n) + " field(s), got " + std::to_string(m_tokens.size() - 1));
  }
  const std::string& at(size_t i) const { return m_tokens.at(i); }

  int64_t integer(size_t i, int64_t min = 0) const {
    const std::string& t = m_tokens.at(i);
    int64_t v = 0;
    auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (ec != std::errc() || end != t.data() + t.size() || v < min) fail("bad number '" + t + "'");
    return v;
  }
  std::string name(size_t i) const {
    auto s = unescape(m_tokens.at(i));
    if (!s) fail("bad escaped name '" + m_tokens.at(i) + "'");
    return *s;
  }
  DType dtype(size_t i) const {
    auto d = parseDType(m_tokens.at(i));
    if (!d) fail("unknown dtype '" + m_tokens.at(i) + "'");
    return *d;
  }
  Shape shape(size_t i) const {
    const std::string& t = m_tokens.at(i);
    if (t.size() < 2 || t.front() != '[' || t.back() != ']') fail("bad shape '" + t + "'");
    Shape shape;
    std::string body = t.substr(1, t.size() - 2);
    if (body.empty()) return shape;
    std::istringstream in(body);
    std::string dim;
    while (std::getline(in, dim, ',')) {
      int64_t v = 0;
      auto [end, ec] = std::from_chars(dim.data(), dim.data() + dim.size(), v);
      if (ec != std::errc() || end != dim.data() + dim.size() || v < 0) fail("bad shape '" + t + "'");
      shape.push_back(v);
    }
    return shape;
  }
  std::vector<int> ints(size_t i) const {
    std::vector<int> out;
    if (m_tokens.at(i) == "-") return out;
    std::istringstream in(m_tokens.at(i));
    std::string item;
    while (std::getline(in, item, ',')) {
      int v = 0;
      auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
      if (ec != std::errc() || end != item.data() + item.size() || v < 0) fail("bad list '" + m_tokens.at(i) + "'");
      out.push_back(v);
    }
    return out;
  }

 private:
  std::string m_file;
  int m_number;
  std::string m_text;
  std::vector<std::string> m_tokens;
};

struct ConstantEntry {
  DType dtype;
  Shape shape;
  size_t offset, bytes;
  int line;
};

struct ParsedGraph {
  ModuleInfo info;
  GraphPlan plan;
  std::vector<ConstantEntry> constants;
  std::string paramsFile;
  size_t paramsBytes = 0;
  std::string paramsChecksum;
};

/// Reads the version line first so that a module of another format fails on that, not on
/// whatever record it added.
void checkVersion(const std::vector<std::string>& lines, const std::string& file, const std::string& dir) {
  if (lines.empty() || lines[0].rfind("kiln-module ", 0) != 0)
    throw Error(file + ": not a Kiln module (the first line must be 'kiln-module VERSION')", ErrorKind::InvalidModel);
  Line first(file, 1, lines[0]);
  if (first.size() != 2) first.fail("expected 'kiln-module VERSION'");
  int64_t version = first.integer(1);
  if (version == kModuleFormatVersion) return;
  std::string writer;
  if (lines.size() > 1 && lines[1].rfind("kiln-version ", 0) == 0) writer = " (written by Kiln " + lines[1].substr(13) + ")";
  throw Error(dir + ": module format version " + std::to_string(version) + writer +
                  ", this runtime reads version " + std::to_string(kModuleFormatVersion) +
                  "; recompile it with this Kiln (kiln compile MODEL -o DIR)",
              ErrorKind::IncompatibleModule);
}

ParsedGraph parseGraph(const std::vector<std::string>& lines, const std::string& file, const std::string& dir) {
  checkVersion(lines, file, dir);
  ParsedGraph g;
  bool ended = false;
  for (size_t n = 1; n < lines.size() && !ended; ++n) {
    Line line(file, static_cast<int>(n + 1), lines[n]);
    if (line.size() == 0) continue;
    const std::string& k = line.keyword();
    if (k == "kiln-version") {
      line.expectFields(1);
      g.info.kilnVersion = line.at(1);
    } else if (k == "target") {
      g.info.target = line.rest();
    } else if (k == "triple") {
      line.expectFields(1);
      g.info.triple = line.at(1);
    } else if (k == "cpu") {
      line.expectFields(1);
      g.info.cpu = line.at(1);
    } else if (k == "features") {
      for (size_t i = 1; i < line.size(); ++i) g.info.cpuFeatures.push_back(line.at(i));
    } else if (k == "library") {
      line.expectFields(1);
      g.info.library = line.name(1);
      if (g.info.library.find('/') != std::string::npos) line.fail("the library must be a file name in the module");
    } else if (k == "signature") {
      line.expectFields(1);
      g.info.signature = line.at(1);
    } else if (k == "params") {
      line.expectFields(3);
      g.paramsFile = line.name(1);
      if (g.paramsFile.find('/') != std::string::npos) line.fail("params must be a file name in the module");
      g.paramsBytes = static_cast<size_t>(line.integer(2));
      g.paramsChecksum = line.at(3);
    } else if (k == "slot") {
      line.expectFields(6);
      if (line.integer(1) != static_cast<int64_t>(g.plan.slots.size())) line.fail("slots must be numbered in order");
      TensorSlot slot;
      const std::string& kind = line.at(2);
      if (kind == "input") slot.kind = SlotKind::Input;
      else if (kind == "constant") slot.kind = SlotKind::Constant;
      else if (kind == "intermediate") slot.kind = SlotKind::Intermediate;
      else line.fail("unknown slot kind '" + kind + "'");
      slot.index = static_cast<int>(line.integer(3, -1));
      slot.dtype = line.dtype(4);
      slot.shape = line.shape(5);
      slot.name = line.name(6);
      g.plan.slots.push_back(std::move(slot));
    } else if (k == "call") {
      line.expectFields(4);
      KernelCall call;
      call.kernel = line.name(1);
      call.numOutputs = static_cast<int>(line.integer(2));
      call.args = line.ints(3);
      call.node = line.name(4);
      for (int a : call.args) {
        if (a >= static_cast<int>(g.plan.slots.size())) line.fail("call argument " + std::to_string(a) + " is not a slot");
      }
      if (call.numOutputs > static_cast<int>(call.args.size())) line.fail("more outputs than arguments");
      g.plan.calls.push_back(std::move(call));
    } else if (k == "input" || k == "output") {
      line.expectFields(1);
      int64_t slot = line.integer(1);
      if (slot >= static_cast<int64_t>(g.plan.slots.size())) line.fail("slot " + std::to_string(slot) + " is not defined");
      (k == "input" ? g.plan.inputs : g.plan.outputs).push_back(static_cast<int>(slot));
    } else if (k == "constant") {
      line.expectFields(5);
      if (line.integer(1) != static_cast<int64_t>(g.constants.size())) line.fail("constants must be numbered in order");
      ConstantEntry c{line.dtype(2), line.shape(3), static_cast<size_t>(line.integer(4)),
                      static_cast<size_t>(line.integer(5)), static_cast<int>(n + 1)};
      if (c.bytes != static_cast<size_t>(numElements(c.shape)) * dtypeSize(c.dtype))
        line.fail("constant size does not match its shape and dtype");
      if (c.offset % kParamsAlign != 0) line.fail("constant offset is not 64-byte aligned");
      g.constants.push_back(std::move(c));
    } else if (k == "end") {
      ended = true;
    } else {
      line.fail("unknown record '" + k + "'");
    }
  }
  if (!ended) throw Error(file + ": truncated (no 'end' line)", ErrorKind::InvalidModel);
  if (g.paramsFile.empty()) throw Error(file + ": no 'params' record", ErrorKind::InvalidModel);
  // Cross-references: every slot's index means what its kind says.
  for (size_t s = 0; s < g.plan.slots.size(); ++s) {
    const TensorSlot& slot = g.plan.slots[s];
    const std::string where = file + ": slot " + std::to_string(s) + " ('" + slot.name + "')";
    if (slot.kind == SlotKind::Constant) {
      if (slot.index < 0 || slot.index >= static_cast<int>(g.constants.size()))
        throw Error(where + " refers to a missing constant", ErrorKind::InvalidModel);
      const ConstantEntry& c = g.constants[slot.index];
      if (c.dtype != slot.dtype || c.shape != slot.shape)
        throw Error(where + " does not match constant " + std::to_string(slot.index), ErrorKind::InvalidModel);
    }
    if (slot.kind == SlotKind::Input &&
        (slot.index < 0 || slot.index >= static_cast<int>(g.plan.inputs.size()) || g.plan.inputs[slot.index] != static_cast<int>(s)))
      throw Error(where + " is not listed as input " + std::to_string(slot.index), ErrorKind::InvalidModel);
  }
  return g;
}

/// Reads params.bin into one aligned block and checks its header, size and checksum.
std::shared_ptr<Storage> readParams(const fs::path& path, size_t expectedBytes, const std::string& checksum) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot open file (is the module complete?)", ErrorKind::Io);
  char header[kParamsHeaderBytes];
  if (!in.read(header, kParamsHeaderBytes) || std::memcmp(header, kParamsMagic, sizeof kParamsMagic) != 0)
    throw Error(path.string() + ": not a Kiln params file", ErrorKind::InvalidModel);
  uint64_t bytes = 0;
  std::memcpy(&bytes, header + 8, 8);
  std::error_code ec;
  const uintmax_t fileBytes = fs::file_size(path, ec);
  if (bytes != expectedBytes || ec || fileBytes != kParamsHeaderBytes + bytes)
    throw Error(path.string() + ": holds " + std::to_string(ec ? 0 : fileBytes) + " bytes, graph.txt expects " +
                    std::to_string(kParamsHeaderBytes + expectedBytes) + " (truncated, or from another export)",
                ErrorKind::InvalidModel);
  auto storage = std::make_shared<Storage>(bytes);
  if (bytes && !in.read(static_cast<char*>(storage->data()), static_cast<std::streamsize>(bytes)))
    throw Error(path.string() + ": read failed", ErrorKind::Io);
  if (hex64(fnv1a64(static_cast<const unsigned char*>(storage->data()), bytes)) != checksum)
    throw Error(path.string() + ": checksum mismatch (corrupted, or from another export)", ErrorKind::InvalidModel);
  return storage;
}

std::vector<std::string> readLines(const fs::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

}  // namespace

std::string newModuleSignature() {
  std::random_device device;
  std::mt19937_64 rng((static_cast<uint64_t>(device()) << 32) ^ device());
  return hex64(rng()) + hex64(rng());
}

void saveModule(const std::string& dir, const GraphPlan& plan, const ModuleInfo& info) {
  if (!plan.regions.empty())
    throw Error("this model has control flow (if/loop), which exported modules cannot hold yet; run it with `kiln run`",
                ErrorKind::Unsupported);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) throw Error(dir + ": cannot create the module directory", ErrorKind::Io);

  // params.bin: every constant at a 64-byte aligned offset of the data section.
  std::vector<size_t> offsets;
  size_t dataBytes = 0;
  for (const Tensor& c : plan.constants) {
    dataBytes = alignUp(dataBytes);
    offsets.push_back(dataBytes);
    dataBytes += c.nbytes();
  }
  std::string params(kParamsHeaderBytes + dataBytes, '\0');
  std::memcpy(params.data(), kParamsMagic, sizeof kParamsMagic);
  const uint64_t size64 = dataBytes;
  std::memcpy(params.data() + 8, &size64, 8);
  for (size_t i = 0; i < plan.constants.size(); ++i) {
    const Tensor& c = plan.constants[i];
    if (c.nbytes()) std::memcpy(params.data() + kParamsHeaderBytes + offsets[i], c.raw(), c.nbytes());
  }
  const auto* data = reinterpret_cast<const unsigned char*>(params.data()) + kParamsHeaderBytes;
  const std::string checksum = hex64(fnv1a64(data, dataBytes));

  std::ostringstream g;
  g << "kiln-module " << kModuleFormatVersion << "\n";
  g << "kiln-version " << (info.kilnVersion.empty() ? "unknown" : info.kilnVersion) << "\n";
  g << "target " << info.target << "\n";
  g << "triple " << info.triple << "\n";
  g << "cpu " << info.cpu << "\n";
  g << "features";
  for (const std::string& f : info.cpuFeatures) g << " " << f;
  g << "\n";
  g << "library " << escape(info.library) << "\n";
  g << "signature " << info.signature << "\n";
  g << "params " << kModuleParamsFile << " " << dataBytes << " " << checksum << "\n";
  for (size_t s = 0; s < plan.slots.size(); ++s) {
    const TensorSlot& slot = plan.slots[s];
    g << "slot " << s << " " << slotKindName(slot.kind) << " " << slot.index << " " << dtypeName(slot.dtype) << " "
      << shapeString(slot.shape) << " " << escape(slot.name) << "\n";
  }
  for (const KernelCall& call : plan.calls)
    g << "call " << escape(call.kernel) << " " << call.numOutputs << " " << joinInts(call.args) << " "
      << escape(call.node) << "\n";
  for (int in : plan.inputs) g << "input " << in << "\n";
  for (int out : plan.outputs) g << "output " << out << "\n";
  for (size_t i = 0; i < plan.constants.size(); ++i) {
    const Tensor& c = plan.constants[i];
    g << "constant " << i << " " << dtypeName(c.dtype()) << " " << shapeString(c.shape()) << " " << offsets[i] << " "
      << c.nbytes() << "\n";
  }
  g << "end\n";

  writeFile(fs::path(dir) / kModuleParamsFile, params);
  writeFile(fs::path(dir) / kModuleGraphFile, g.str());
}

ModuleContents readModule(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) throw Error(dir + ": no such module directory", ErrorKind::Io);
  if (!fs::is_directory(dir, ec))
    throw Error(dir + ": not a module directory (`kiln compile MODEL -o DIR` writes one)", ErrorKind::InvalidModel);
  const fs::path graphPath = fs::path(dir) / kModuleGraphFile;
  if (!fs::exists(graphPath, ec))
    throw Error(dir + ": not a Kiln module (no " + kModuleGraphFile + ")", ErrorKind::InvalidModel);
  ParsedGraph g = parseGraph(readLines(graphPath), graphPath.string(), dir);

  std::shared_ptr<Storage> params =
      readParams(fs::path(dir) / g.paramsFile, g.paramsBytes, g.paramsChecksum);
  for (const ConstantEntry& c : g.constants) {
    if (c.offset + c.bytes > g.paramsBytes)
      throw Error(graphPath.string() + ":" + std::to_string(c.line) + ": constant lies outside params.bin",
                  ErrorKind::InvalidModel);
    g.plan.constants.push_back(Tensor::view(params, c.offset, c.dtype, c.shape));
  }
  return ModuleContents{std::move(g.info), std::move(g.plan)};
}

}  // namespace kiln::runtime
