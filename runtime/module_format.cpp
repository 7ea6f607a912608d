// graph.txt and params.bin of an exported module: writer and strict reader (format in module.h).
#include "runtime/module.h"

#include <bit>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <optional>
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

/// A plan as read: its records, its constants' entries, and its sub-plans (`region` blocks).
struct ParsedPlan {
  GraphPlan plan;
  std::vector<ConstantEntry> constants;
  std::deque<ParsedPlan> regions;  // a deque: the reader keeps pointers to open ones
};

struct ParsedGraph {
  ModuleInfo info;
  ParsedPlan root;
  std::string paramsFile;
  size_t paramsBytes = 0;
  std::string paramsChecksum;
};

/// Reads the version line first so that a module of another format fails on that, not on
/// whatever record it added. Returns the version.
int checkVersion(const std::vector<std::string>& lines, const std::string& file, const std::string& dir) {
  if (lines.empty() || lines[0].rfind("kiln-module ", 0) != 0)
    throw Error(file + ": not a Kiln module (the first line must be 'kiln-module VERSION')", ErrorKind::InvalidModel);
  Line first(file, 1, lines[0]);
  if (first.size() != 2) first.fail("expected 'kiln-module VERSION'");
  int64_t version = first.integer(1);
  if (version >= kModuleFormatMinVersion && version <= kModuleFormatVersion) return static_cast<int>(version);
  std::string writer;
  if (lines.size() > 1 && lines[1].rfind("kiln-version ", 0) == 0) writer = " (written by Kiln " + lines[1].substr(13) + ")";
  throw Error(dir + ": module format version " + std::to_string(version) + writer +
                  ", this runtime reads versions " + std::to_string(kModuleFormatMinVersion) + " to " +
                  std::to_string(kModuleFormatVersion) +
                  "; recompile it with this Kiln (kiln compile MODEL -o DIR)",
              ErrorKind::IncompatibleModule);
}

std::optional<CallKind> controlKind(const std::string& name) {
  if (name == "if") return CallKind::If;
  if (name == "loop") return CallKind::Loop;
  return std::nullopt;
}

/// Cross-references inside one plan, once its records (and sub-plans) are read: every slot's
/// index means what its kind says, and control calls name sub-plans that exist.
void checkPlan(const ParsedPlan& p, const std::string& file, const std::string& where) {
  const GraphPlan& plan = p.plan;
  for (size_t s = 0; s < plan.slots.size(); ++s) {
    const TensorSlot& slot = plan.slots[s];
    const std::string at = file + ": " + where + "slot " + std::to_string(s) + " ('" + slot.name + "')";
    if (slot.kind == SlotKind::Constant) {
      if (slot.index < 0 || slot.index >= static_cast<int>(p.constants.size()))
        throw Error(at + " refers to a missing constant", ErrorKind::InvalidModel);
      const ConstantEntry& c = p.constants[slot.index];
      if (c.dtype != slot.dtype || c.shape != slot.shape)
        throw Error(at + " does not match constant " + std::to_string(slot.index), ErrorKind::InvalidModel);
    }
    if (slot.kind == SlotKind::Input &&
        (slot.index < 0 || slot.index >= static_cast<int>(plan.inputs.size()) || plan.inputs[slot.index] != static_cast<int>(s)))
      throw Error(at + " is not listed as input " + std::to_string(slot.index), ErrorKind::InvalidModel);
  }
  for (const KernelCall& call : plan.calls)
    for (int r : call.regions)
      if (r >= static_cast<int>(p.regions.size()))
        throw Error(file + ": " + where + "call '" + call.node + "' names region " + std::to_string(r) +
                        ", which is not defined",
                    ErrorKind::InvalidModel);
}

ParsedGraph parseGraph(const std::vector<std::string>& lines, const std::string& file, const std::string& dir) {
  ParsedGraph g;
  g.info.formatVersion = checkVersion(lines, file, dir);
  // The plans being read: the module's, then each open `region` block inside it.
  std::vector<ParsedPlan*> open = {&g.root};
  std::string path;  // of the innermost open region: "region 0.1: "
  bool ended = false;
  for (size_t n = 1; n < lines.size() && !ended; ++n) {
    Line line(file, static_cast<int>(n + 1), lines[n]);
    if (line.size() == 0) continue;
    const std::string& k = line.keyword();
    ParsedPlan& cur = *open.back();
    GraphPlan& plan = cur.plan;
    const bool header = k == "kiln-version" || k == "target" || k == "triple" || k == "cpu" || k == "features" ||
                        k == "library" || k == "signature" || k == "params";
    if (header && open.size() > 1) line.fail("'" + k + "' inside a region");
    if ((k == "control" || k == "region" || k == "endregion") && g.info.formatVersion < 2)
      line.fail("'" + k + "' needs module format version 2 (this file says version " +
                std::to_string(g.info.formatVersion) + ")");
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
      if (line.integer(1) != static_cast<int64_t>(plan.slots.size())) line.fail("slots must be numbered in order");
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
      plan.slots.push_back(std::move(slot));
    } else if (k == "call" || k == "control") {
      const bool control = k == "control";
      line.expectFields(control ? 5 : 4);
      KernelCall call;
      size_t f = 1;
      if (control) {
        std::optional<CallKind> kind = controlKind(line.at(f++));
        if (!kind) line.fail("unknown control kind '" + line.at(1) + "' (if or loop)");
        call.kind = *kind;
      } else {
        call.kernel = line.name(f++);
      }
      call.numOutputs = static_cast<int>(line.integer(f++));
      call.args = line.ints(f++);
      call.node = line.name(f++);
      if (control) call.regions = line.ints(f++);
      for (int a : call.args) {
        if (a >= static_cast<int>(plan.slots.size())) line.fail("call argument " + std::to_string(a) + " is not a slot");
      }
      if (call.numOutputs > static_cast<int>(call.args.size())) line.fail("more outputs than arguments");
      plan.calls.push_back(std::move(call));
    } else if (k == "input" || k == "output") {
      line.expectFields(1);
      int64_t slot = line.integer(1);
      if (slot >= static_cast<int64_t>(plan.slots.size())) line.fail("slot " + std::to_string(slot) + " is not defined");
      (k == "input" ? plan.inputs : plan.outputs).push_back(static_cast<int>(slot));
    } else if (k == "constant") {
      line.expectFields(5);
      if (line.integer(1) != static_cast<int64_t>(cur.constants.size())) line.fail("constants must be numbered in order");
      ConstantEntry c{line.dtype(2), line.shape(3), static_cast<size_t>(line.integer(4)),
                      static_cast<size_t>(line.integer(5)), static_cast<int>(n + 1)};
      if (c.bytes != static_cast<size_t>(numElements(c.shape)) * dtypeSize(c.dtype))
        line.fail("constant size does not match its shape and dtype");
      if (c.offset % kParamsAlign != 0) line.fail("constant offset is not 64-byte aligned");
      cur.constants.push_back(std::move(c));
    } else if (k == "region") {
      line.expectFields(1);
      if (line.integer(1) != static_cast<int64_t>(cur.regions.size())) line.fail("regions must be numbered in order");
      if (open.size() > 64) line.fail("regions nested more than 64 deep");
      path += (open.size() == 1 ? "" : ".") + std::to_string(cur.regions.size());
      cur.regions.emplace_back();
      open.push_back(&cur.regions.back());
    } else if (k == "endregion") {
      line.expectFields(0);
      if (open.size() == 1) line.fail("'endregion' without 'region'");
      checkPlan(cur, file, "region " + path + ": ");
      open.pop_back();
      size_t dot = path.rfind('.');
      path.erase(dot == std::string::npos ? 0 : dot);
    } else if (k == "end") {
      if (open.size() > 1) line.fail("'end' inside a region (a region is not closed)");
      ended = true;
    } else {
      line.fail("unknown record '" + k + "'");
    }
  }
  if (!ended) throw Error(file + ": truncated (no 'end' line)", ErrorKind::InvalidModel);
  if (g.paramsFile.empty()) throw Error(file + ": no 'params' record", ErrorKind::InvalidModel);
  checkPlan(g.root, file, "");
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
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) throw Error(dir + ": cannot create the module directory", ErrorKind::Io);

  // params.bin: every constant (the plan's, then each sub-plan's in order) at a 64-byte aligned
  // offset of the data section.
  std::vector<const Tensor*> constants;
  std::function<void(const GraphPlan&)> collect = [&](const GraphPlan& p) {
    for (const Tensor& c : p.constants) constants.push_back(&c);
    for (const GraphPlan& r : p.regions) collect(r);
  };
  collect(plan);
  std::vector<size_t> offsets;
  size_t dataBytes = 0;
  for (const Tensor* c : constants) {
    dataBytes = alignUp(dataBytes);
    offsets.push_back(dataBytes);
    dataBytes += c->nbytes();
  }
  std::string params(kParamsHeaderBytes + dataBytes, '\0');
  std::memcpy(params.data(), kParamsMagic, sizeof kParamsMagic);
  const uint64_t size64 = dataBytes;
  std::memcpy(params.data() + 8, &size64, 8);
  for (size_t i = 0; i < constants.size(); ++i) {
    const Tensor& c = *constants[i];
    if (c.nbytes()) std::memcpy(params.data() + kParamsHeaderBytes + offsets[i], c.raw(), c.nbytes());
  }
  const auto* data = reinterpret_cast<const unsigned char*>(params.data()) + kParamsHeaderBytes;
  const std::string checksum = hex64(fnv1a64(data, dataBytes));

  std::ostringstream g;
  // Version 1 when the plan has no control flow, so runtimes that read only version 1 (older
  // ones, the WebAssembly runtime) still load it.
  g << "kiln-module " << (plan.regions.empty() ? 1 : kModuleFormatVersion) << "\n";
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
  size_t nextConstant = 0;
  std::function<void(const GraphPlan&)> write = [&](const GraphPlan& p) {
    for (size_t s = 0; s < p.slots.size(); ++s) {
      const TensorSlot& slot = p.slots[s];
      g << "slot " << s << " " << slotKindName(slot.kind) << " " << slot.index << " " << dtypeName(slot.dtype) << " "
        << shapeString(slot.shape) << " " << escape(slot.name) << "\n";
    }
    for (const KernelCall& call : p.calls) {
      if (call.kind == CallKind::Kernel)
        g << "call " << escape(call.kernel);
      else
        g << "control " << (call.kind == CallKind::If ? "if" : "loop");
      g << " " << call.numOutputs << " " << joinInts(call.args) << " " << escape(call.node);
      if (call.kind != CallKind::Kernel) g << " " << joinInts(call.regions);
      g << "\n";
    }
    for (int in : p.inputs) g << "input " << in << "\n";
    for (int out : p.outputs) g << "output " << out << "\n";
    for (size_t i = 0; i < p.constants.size(); ++i, ++nextConstant) {
      const Tensor& c = p.constants[i];
      g << "constant " << i << " " << dtypeName(c.dtype()) << " " << shapeString(c.shape()) << " "
        << offsets[nextConstant] << " " << c.nbytes() << "\n";
    }
    for (size_t r = 0; r < p.regions.size(); ++r) {
      g << "region " << r << "\n";
      write(p.regions[r]);
      g << "endregion\n";
    }
  };
  write(plan);
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
  // Each plan's constants view params.bin; its sub-plans follow in order.
  std::function<GraphPlan(ParsedPlan&)> finish = [&](ParsedPlan& p) {
    for (const ConstantEntry& c : p.constants) {
      if (c.offset + c.bytes > g.paramsBytes)
        throw Error(graphPath.string() + ":" + std::to_string(c.line) + ": constant lies outside params.bin",
                    ErrorKind::InvalidModel);
      p.plan.constants.push_back(Tensor::view(params, c.offset, c.dtype, c.shape));
    }
    for (ParsedPlan& r : p.regions) p.plan.regions.push_back(finish(r));
    return std::move(p.plan);
  };
  GraphPlan plan = finish(g.root);
  return ModuleContents{std::move(g.info), std::move(plan)};
}

}  // namespace kiln::runtime
