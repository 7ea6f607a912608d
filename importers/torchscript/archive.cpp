// Reading a TorchScript archive and checking it before libtorch sees it; see archive.h.
#include "importers/torchscript/archive.h"

#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <torch/csrc/jit/serialization/import.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "importers/torchscript/context.h"

namespace kiln::importers::ts {

std::string firstLine(const std::string& text) {
  size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "unknown error";
  size_t end = text.find('\n', begin);
  std::string line = text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
  while (!line.empty() && (line.back() == ' ' || line.back() == '\r' || line.back() == '.')) line.pop_back();
  return line;
}

std::string torchMessage(const std::exception& e) {
  if (const auto* c10Error = dynamic_cast<const c10::Error*>(&e)) return firstLine(c10Error->what_without_backtrace());
  return firstLine(e.what());
}

void requireFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) return;
  if (std::filesystem::exists(path, ec)) throw Error(path + ": not a regular file", ErrorKind::Io);
  throw Error(path + ": no such file", ErrorKind::Io);
}

namespace {

namespace jit = torch::jit;

/// A model file read into memory once: the checks below and libtorch's load see the same bytes.
using ArchiveBytes = std::shared_ptr<std::string>;

ArchiveBytes readArchive(const std::string& path) { return readFileBytes(path); }

/// libtorch's reader interface over an archive in memory.
class MemoryReadAdapter final : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit MemoryReadAdapter(std::shared_ptr<const std::string> bytes) : m_bytes(std::move(bytes)) {}
  size_t size() const override { return m_bytes->size(); }
  size_t read(uint64_t pos, void* buf, size_t n, const char* /*what*/) const override {
    if (pos >= m_bytes->size()) return 0;
    n = static_cast<size_t>(std::min<uint64_t>(n, m_bytes->size() - pos));
    std::memcpy(buf, m_bytes->data() + pos, n);
    return n;
  }

 private:
  std::shared_ptr<const std::string> m_bytes;
};

std::unique_ptr<caffe2::serialize::PyTorchStreamReader> openArchive(const ArchiveBytes& bytes) {
  return openZipInMemory(bytes);
}

/// Why a file libtorch could not load is not a TorchScript archive, in the user's terms; empty
/// when it looks like one (the load then failed for another reason).
std::string archiveProblem(const ArchiveBytes& bytes) {
  if (bytes->empty()) return "empty file, not a TorchScript archive";
  if (bytes->size() < 4 || bytes->compare(0, 4, "PK\x03\x04") != 0) {
    if (static_cast<unsigned char>((*bytes)[0]) == 0x80)  // a pickle protocol marker: legacy torch.save
      return "not a TorchScript archive (a pickle from torch.save; save the model with torch.jit.save)";
    return "not a TorchScript archive (not a zip file)";
  }
  std::vector<std::string> records;
  try {
    records = openArchive(bytes)->getAllRecords();
  } catch (const std::exception& e) {
    std::string why = torchMessage(e);
    if (why.find("central directory") != std::string::npos)
      return "not a TorchScript archive (truncated or corrupt zip: no central directory)";
    if (why.find("hasRecord(\"version\")") != std::string::npos)
      return "not a TorchScript archive (zip has no version/constants.pkl/data.pkl)";
    if (size_t enforce = why.find("] . "); why.rfind("[enforce fail", 0) == 0 && enforce != std::string::npos)
      why = why.substr(enforce + 4);
    if (size_t plea = why.find("  (Could this error message be improved?"); plea != std::string::npos)
      why = why.substr(0, plea);
    return "not a TorchScript archive (" + why + ")";
  }
  auto has = [&](const char* name) { return std::find(records.begin(), records.end(), name) != records.end(); };
  if (has("data.pkl") && !has("constants.pkl"))
    return "not a TorchScript archive (a torch.save archive of weights or a pickled module; save the model with "
           "torch.jit.save)";
  if (!has("data.pkl") || !has("constants.pkl")) return "not a TorchScript archive (zip has no constants.pkl/data.pkl)";
  return {};
}

/// What is wrong with one pickle (a *.pkl record of the archive) that libtorch's unpickler would trust
/// into a huge allocation or memory corruption, empty when nothing is: a memo index (LONG_BINPUT)
/// beyond what a pickle of this size can hold (the memo table is grown to the index: 16 bytes per
/// slot up to 4 G slots), a length prefix longer than the bytes left, or an opcode that takes more
/// items off libtorch's stack than there are above the innermost MARK (libtorch 1.13's REDUCE,
/// BUILD, APPEND, TUPLE, ... do not check: they swap or erase outside the stack), a collection
/// opcode without its MARK, or a STOP that does not leave exactly one value. The walk stops at the
/// first opcode it does not know (libtorch then judges the rest itself); stack tracking stops at
/// the first opcode whose stack effect it does not model. With `storageBytes` (the size of a tensor
/// storage record by its key), every storage a persistent id asks for (`('storage', torch.FloatStorage,
/// key, device, numel)`, BINPERSID) must fit its record: libtorch sizes the storage from `numel`
/// and copies from the record unchecked.
std::string pickleProblem(const uint8_t* data, size_t size,
                          const std::function<std::optional<uint64_t>(std::string_view)>& storageBytes = {}) {
  size_t pos = 0;
  auto little = [&](size_t at, size_t bytes) {
    uint64_t v = 0;
    for (size_t i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(data[at + i]) << (8 * i);
    return v;
  };
  auto skipLine = [&]() {  // text arguments end with a newline
    while (pos < size && data[pos] != '\n') ++pos;
    if (pos < size) ++pos;
  };
  // Opcodes by their argument (pickle protocols 0-5): none, a text line, two text lines, fixed-size
  // bytes, a length prefix of 1, 4 or 8 bytes followed by that many bytes.
  auto in = [](std::string_view opcodes, uint8_t op) {
    return opcodes.find(static_cast<char>(op)) != std::string_view::npos;
  };
  // libtorch's stack, as far as these checks need its values (strings, integers, globals), and
  // the heights at the open MARKs.
  struct Value {
    enum class Kind { Other, Text, Number, Global } kind = Kind::Other;
    std::string_view text;  // Text; Global: "module\nname"
    uint64_t number = 0;
  };
  bool tracking = true;
  std::vector<Value> stack;
  std::vector<size_t> marks;
  std::unordered_map<uint64_t, Value> memo;
  std::vector<Value> lastTuple;  // what the last TUPLE built, for a BINPERSID right after it
  uint8_t previous = 0;
  auto floor = [&] { return marks.empty() ? size_t{0} : marks.back(); };
  // Takes `pops` items (all above the innermost MARK) and pushes `pushes` others; false on underflow.
  auto effect = [&](size_t pops, size_t pushes) {
    if (stack.size() - floor() < pops) return false;
    stack.resize(stack.size() - pops);
    stack.resize(stack.size() + pushes);  // results are opaque
    return true;
  };
  // Ends the innermost MARK: `keep` items below it must exist (the list of APPENDS, the dict of
  // SETITEMS) and `pushes` items replace those above it.
  auto endMark = [&](size_t keep, size_t pushes) {
    if (marks.empty() || marks.back() < keep) return false;
    stack.resize(marks.back());
    stack.resize(marks.back() + pushes);  // results are opaque
    marks.pop_back();
    return true;
  };
  auto text = [&](size_t from, size_t length) {
    return std::string_view(reinterpret_cast<const char*>(data) + from, length);
  };
  // The value a literal opcode at `pos` (its argument) pushes.
  auto literal = [&](uint8_t op) {
    Value v;
    size_t left = size - pos;
    if ((op == 'X' && left >= 4) || (op == 0x8c && left >= 1)) {
      size_t prefix = op == 'X' ? 4 : 1;
      uint64_t length = little(pos, prefix);
      if (length <= left - prefix) v = {Value::Kind::Text, text(pos + prefix, length), 0};
    } else if ((op == 'K' && left >= 1) || (op == 'M' && left >= 2) || (op == 'J' && left >= 4)) {
      size_t bytes = op == 'K' ? 1 : op == 'M' ? 2 : 4;
      uint64_t n = little(pos, bytes);
      if (op != 'J' || n < 0x80000000u) v = {Value::Kind::Number, {}, n};  // non-negative only
    } else if (op == 'c') {
      const void* first = std::memchr(data + pos, '\n', left);
      const void* second =
          first ? std::memchr(static_cast<const uint8_t*>(first) + 1, '\n', size - (static_cast<const uint8_t*>(first) + 1 - data))
                : nullptr;
      if (second) v = {Value::Kind::Global, text(pos, static_cast<const uint8_t*>(second) - (data + pos)), 0};
    } else if ((op == 'h' && left >= 1) || (op == 'j' && left >= 4)) {
      auto it = memo.find(little(pos, op == 'h' ? 1 : 4));
      if (it != memo.end()) v = it->second;
    }
    return v;
  };
  // The bytes of one element of a storage class (torch.FloatStorage, ...), 0 if not known here.
  auto elementBytes = [](std::string_view global) -> uint64_t {
    static const std::map<std::string_view, uint64_t> kSizes = {
        {"torch\nFloatStorage", 4},  {"torch\nDoubleStorage", 8}, {"torch\nHalfStorage", 2},
        {"torch\nBFloat16Storage", 2}, {"torch\nLongStorage", 8}, {"torch\nIntStorage", 4},
        {"torch\nShortStorage", 2},  {"torch\nCharStorage", 1},   {"torch\nByteStorage", 1},
        {"torch\nBoolStorage", 1},   {"torch\nQInt8Storage", 1},  {"torch\nQUInt8Storage", 1},
        {"torch\nQInt32Storage", 4}, {"torch\nComplexFloatStorage", 8}, {"torch\nComplexDoubleStorage", 16}};
    auto it = kSizes.find(global);
    return it == kSizes.end() ? 0 : it->second;
  };
  auto storageProblem = [&](size_t at) -> std::string {
    const std::vector<Value>& id = lastTuple;
    if (!storageBytes || id.size() != 5 || id[0].kind != Value::Kind::Text || id[0].text != "storage" ||
        id[1].kind != Value::Kind::Global || id[2].kind != Value::Kind::Text || id[4].kind != Value::Kind::Number)
      return {};
    uint64_t element = elementBytes(id[1].text);
    std::optional<uint64_t> stored = storageBytes(id[2].text);
    if (element == 0 || !stored || id[4].number == 0) return {};
    uint64_t needed = 0;
    if (__builtin_mul_overflow(id[4].number, element, &needed) || needed > *stored)
      return "storage '" + std::string(id[2].text) + "' at byte " + std::to_string(at) + " needs " +
             std::to_string(id[4].number) + " elements of " + std::to_string(element) + " bytes, its record holds " +
             std::to_string(*stored);
    return {};
  };
  while (pos < size) {
    const size_t at = pos;
    const uint8_t op = data[pos++];
    if (op == '.') {  // STOP
      if (tracking && (stack.size() != 1 || !marks.empty()))
        return "STOP at byte " + std::to_string(at) + " leaves " + std::to_string(stack.size()) + " values";
      return {};
    }
    if (tracking) {
      bool ok = true;
      if (op == '(') {
        marks.push_back(stack.size());
      } else if (in("N)]}cghjKMJILFGXTUCBSV\x88\x89\x8a\x8b\x8c\x8d\x8e\x96", op)) {
        stack.push_back(literal(op));
      } else if (in("qrp\x94", op)) {  // memo writes read the top, wherever the MARK is
        ok = !stack.empty();
        if (ok && op == 'q' && size - pos >= 1) memo[little(pos, 1)] = stack.back();
        if (ok && op == 'r' && size - pos >= 4) memo[little(pos, 4)] = stack.back();
        if (ok && op == 0x94) memo[memo.size()] = stack.back();
      } else if (in("ab\x81R", op)) {  // APPEND, BUILD, NEWOBJ, REDUCE: two items become one
        ok = effect(2, 1);
      } else if (op == 's') {  // SETITEM
        ok = effect(3, 1);
      } else if (op == 'Q') {  // BINPERSID
        if (previous == 't')
          if (std::string problem = storageProblem(at); !problem.empty()) return problem;
        ok = effect(1, 1);
      } else if (op >= 0x85 && op <= 0x87) {  // TUPLE1..3
        ok = effect(op - 0x84u, 1);
      } else if (op == 't') {
        if (!marks.empty() && marks.back() <= stack.size())
          lastTuple.assign(stack.begin() + static_cast<std::ptrdiff_t>(marks.back()), stack.end());
        ok = endMark(0, 1);
      } else if (in("ld", op)) {  // LIST, DICT
        ok = endMark(0, 1);
      } else if (in("eu", op)) {  // APPENDS, SETITEMS
        ok = endMark(1, 0);
      } else if (op != 0x80 && op != 0x95) {  // not PROTO or FRAME
        tracking = false;
      }
      previous = op;
      if (!ok)
        return "opcode '" + std::string(std::isprint(op) ? std::string(1, static_cast<char>(op)) : std::to_string(op)) +
               "' at byte " + std::to_string(at) + " has too few values on the stack";
    }
    if (in("(012NQRabd}el]ost)u\x81\x85\x86\x87\x88\x89\x8f\x90\x91\x92\x93\x94", op)) continue;
    if (in("FILPSVgp", op) || in("ci", op)) {
      skipLine();
      if (in("ci", op)) skipLine();
      continue;
    }
    if (op == 'r') {  // LONG_BINPUT: a 4-byte memo index
      if (size - pos < 4) return "truncated at byte " + std::to_string(at);
      uint64_t index = little(pos, 4);
      if (index > size)
        return "memo index " + std::to_string(index) + " at byte " + std::to_string(at) + " is out of range";
      pos += 4;
      continue;
    }
    size_t fixed = in("Khq\x80\x82", op) ? 1
                   : in("M\x83", op)     ? 2
                   : in("Jj\x84", op)    ? 4
                   : in("G\x95", op)     ? 8
                                         : 0;
    size_t prefix = in("UC\x8a\x8c", op) ? 1 : in("TXB\x8b", op) ? 4 : in("\x8d\x8e\x96", op) ? 8 : 0;
    if (fixed == 0 && prefix == 0) return {};  // an opcode this walk does not know
    if (size - pos < fixed + prefix) return "truncated at byte " + std::to_string(at);
    pos += fixed;
    if (prefix > 0) {
      uint64_t length = little(pos, prefix);
      pos += prefix;
      if (length > size - pos)
        return "a length of " + std::to_string(length) + " bytes at byte " + std::to_string(at) +
               " runs past the end";
      pos += length;
    }
  }
  return {};
}

/// A value of a source-map pickle (sourceMapProblem): what torch's writer puts there. Lists hold
/// integers only, so values cannot form cycles.
struct MapValue {
  enum class Kind { Int, String, None, Bool, Tuple, IntList, BuildIntList };
  Kind kind = Kind::None;
  int64_t number = 0;
  std::string_view text;
  std::vector<std::shared_ptr<MapValue>> items;  // Tuple
  std::vector<int64_t> ints;                     // IntList
  int depth = 0;                                 // of nested tuples
};

/// Decodes a source-map pickle with a machine that knows only the opcodes torch's pickler emits
/// for it (protocol 2: tuples, strings, integers, bools, None, memo operations, and integer lists
/// built by `torch.jit._pickle.build_intlist`); `why` says what stopped it.
std::shared_ptr<MapValue> decodeSourceMap(const uint8_t* data, size_t size, std::string& why) {
  using Kind = MapValue::Kind;
  using Ptr = std::shared_ptr<MapValue>;
  std::vector<Ptr> stack;
  std::vector<size_t> marks;
  std::unordered_map<uint64_t, Ptr> memo;
  size_t pos = 0;
  auto make = [](Kind kind) {
    auto v = std::make_shared<MapValue>();
    v->kind = kind;
    return v;
  };
  auto little = [&](size_t bytes) {
    uint64_t v = 0;
    for (size_t i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(data[pos + i]) << (8 * i);
    pos += bytes;
    return v;
  };
  auto fail = [&](size_t at, const std::string& what) {
    why = what + " at byte " + std::to_string(at);
    return nullptr;
  };
  // The map nests six deep; a bound keeps the values' destruction from recursing without limit.
  constexpr int kMaxDepth = 16;
  auto tuple = [&](size_t from) {
    Ptr t = make(Kind::Tuple);
    t->items.assign(stack.begin() + static_cast<std::ptrdiff_t>(from), stack.end());
    for (const Ptr& item : t->items) t->depth = std::max(t->depth, item->depth + 1);
    stack.resize(from);
    stack.push_back(std::move(t));
    return stack.back()->depth <= kMaxDepth;
  };
  while (pos < size) {
    const size_t at = pos;
    const uint8_t op = data[pos++];
    // Bytes of the opcode's fixed-size argument.
    size_t argument = op == 0x80 || op == 'K' || op == 'q' || op == 'h' || op == 0x8c || op == 0x8a ? 1
                      : op == 'M'                                                                  ? 2
                      : op == 'J' || op == 'r' || op == 'j' || op == 'X'                           ? 4
                      : op == 0x8d                                                                 ? 8
                                                                                                   : 0;
    if (size - pos < argument) return fail(at, "truncated pickle");
    switch (op) {
      case 0x80: pos += 1; break;  // PROTO
      case '.':                    // STOP
        if (stack.size() != 1 || !marks.empty()) return fail(at, "unbalanced pickle");
        return stack.back();
      case '(': marks.push_back(stack.size()); break;
      case 't':
        if (marks.empty() || marks.back() > stack.size()) return fail(at, "TUPLE without MARK");
        if (!tuple(marks.back())) return fail(at, "tuples nested too deep");
        marks.pop_back();
        break;
      case ')': tuple(stack.size()); break;
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1..3
        size_t n = op - 0x84u;
        if (stack.size() < n || (!marks.empty() && stack.size() - n < marks.back()))
          return fail(at, "stack underflow");
        if (!tuple(stack.size() - n)) return fail(at, "tuples nested too deep");
        break;
      }
      case 'X':
      case 0x8c:
      case 0x8d: {  // BINUNICODE, SHORT_BINUNICODE, BINUNICODE8
        uint64_t length = little(argument);
        if (length > size - pos) return fail(at, "a string runs past the end");
        Ptr s = make(Kind::String);
        s->text = std::string_view(reinterpret_cast<const char*>(data) + pos, length);
        pos += length;
        stack.push_back(std::move(s));
        break;
      }
      case 'K':
      case 'M':
      case 'J':
      case 0x8a: {  // BININT1, BININT2, BININT, LONG1
        uint64_t bytes = op == 0x8a ? little(1) : argument;
        if (bytes > 8 || bytes > size - pos) return fail(at, "bad integer");
        uint64_t raw = little(bytes);
        bool negative = (op == 'J' || op == 0x8a) && bytes > 0 && (raw >> (8 * bytes - 1)) & 1;
        if (negative && bytes < 8) raw |= ~uint64_t{0} << (8 * bytes);  // sign-extend
        Ptr n = make(Kind::Int);
        n->number = static_cast<int64_t>(raw);
        stack.push_back(std::move(n));
        break;
      }
      case 'N': stack.push_back(make(Kind::None)); break;
      case 0x88:
      case 0x89: {  // NEWTRUE, NEWFALSE
        Ptr b = make(Kind::Bool);
        b->number = op == 0x88;
        stack.push_back(std::move(b));
        break;
      }
      case 'q':
      case 'r':
      case 0x94: {  // BINPUT, LONG_BINPUT, MEMOIZE
        uint64_t index = op == 0x94 ? memo.size() : little(argument);
        if (stack.empty() || (!marks.empty() && stack.size() == marks.back())) return fail(at, "stack underflow");
        if (index > size) return fail(at, "memo index " + std::to_string(index) + " out of range");
        memo[index] = stack.back();
        break;
      }
      case 'h':
      case 'j': {  // BINGET, LONG_BINGET
        auto it = memo.find(little(argument));
        if (it == memo.end()) return fail(at, "unknown memo entry");
        stack.push_back(it->second);
        break;
      }
      case ']': stack.push_back(make(Kind::IntList)); break;  // EMPTY_LIST
      case 'a':
      case 'e': {  // APPEND, APPENDS: integers onto an integer list
        size_t from = stack.size() - 1;
        if (op == 'e') {
          if (marks.empty()) return fail(at, "APPENDS without MARK");
          from = marks.back();
          marks.pop_back();
        }
        if (stack.size() < 2 || from == 0 || from > stack.size() || (!marks.empty() && from < marks.back()) ||
            stack[from - 1]->kind != Kind::IntList)
          return fail(at, "append to a non-list");
        for (size_t i = from; i < stack.size(); ++i) {
          if (stack[i]->kind != Kind::Int) return fail(at, "a list element is not an integer");
          stack[from - 1]->ints.push_back(stack[i]->number);
        }
        stack.resize(from);
        break;
      }
      case 'c': {  // GLOBAL: only torch.jit._pickle.build_intlist
        std::string_view rest(reinterpret_cast<const char*>(data) + pos, size - pos);
        constexpr std::string_view kBuildIntList = "torch.jit._pickle\nbuild_intlist\n";
        if (rest.substr(0, kBuildIntList.size()) != kBuildIntList) return fail(at, "unexpected GLOBAL");
        pos += kBuildIntList.size();
        stack.push_back(make(Kind::BuildIntList));
        break;
      }
      case 'R': {  // REDUCE: build_intlist((list,))
        if (stack.size() < 2 || (!marks.empty() && stack.size() - 2 < marks.back())) return fail(at, "stack underflow");
        Ptr args = stack.back();
        const Ptr& callable = stack[stack.size() - 2];
        if (callable->kind != Kind::BuildIntList || args->kind != Kind::Tuple || args->items.size() != 1 ||
            args->items[0]->kind != Kind::IntList)
          return fail(at, "unexpected REDUCE");
        Ptr list = make(Kind::IntList);
        list->ints = args->items[0]->ints;
        stack.pop_back();
        stack.back() = std::move(list);
        break;
      }
      default: {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", op);
        return fail(at, std::string("unexpected opcode ") + hex);
      }
    }
  }
  return fail(size, "no STOP");
}

/// What is wrong with a code/**.debug_pkl record, empty when nothing is. It maps byte offsets of
/// the serialized code to the Python source that generated them, and libtorch unpickles it lazily
/// (when a node's source location or an error message's context is asked for) trusting its layout:
/// a wrong field type, tuple size or text-table index crashes it. torch's writer
/// (source_range_serialization.cpp) emits
///   ("FORMAT_WITH_STRING_TABLE", (text, ...), ((byte offset, range, tag), ...))
/// with range = ((text indices, filename index, first line), start, end), and older writers
/// ((byte offset, range[, tag]), ...) with the source as (text, filename or None, first line).
std::string sourceMapProblem(const uint8_t* data, size_t size) {
  using Kind = MapValue::Kind;
  std::string why;
  std::shared_ptr<MapValue> top = decodeSourceMap(data, size, why);
  if (!top) return why;
  auto is = [](const std::shared_ptr<MapValue>& v, Kind kind, size_t items = 0) {
    return v->kind == kind && (kind != Kind::Tuple || v->items.size() == items);
  };
  if (top->kind != Kind::Tuple || top->items.empty()) return "not a non-empty tuple";
  const bool table = top->items[0]->kind == Kind::String && top->items[0]->text == "FORMAT_WITH_STRING_TABLE";
  size_t texts = 0;
  const MapValue* records = top.get();
  if (table) {
    if (top->items.size() != 3 || top->items[1]->kind != Kind::Tuple || top->items[2]->kind != Kind::Tuple)
      return "not a (format, texts, records) tuple";
    for (const auto& t : top->items[1]->items)
      if (t->kind != Kind::String) return "a text-table entry is not a string";
    texts = top->items[1]->items.size();
    records = top->items[2].get();
  }
  int64_t previous = 0;
  for (size_t i = 0; i < records->items.size(); ++i) {
    const std::string where = "record " + std::to_string(i);
    const MapValue& record = *records->items[i];
    if (record.kind != Kind::Tuple || record.items.size() < 2 || record.items.size() > 3 ||
        record.items[0]->kind != Kind::Int || (record.items.size() == 3 && record.items[2]->kind != Kind::Int))
      return where + " is not an (offset, range, tag) tuple";
    if (record.items[0]->number < previous) return where + ": byte offset out of order";
    previous = record.items[0]->number;
    const auto& range = record.items[1];
    if (!is(range, Kind::Tuple, 3) || !is(range->items[1], Kind::Int) || !is(range->items[2], Kind::Int) ||
        range->items[1]->number < 0 || range->items[2]->number < range->items[1]->number)
      return where + ": not a (source, start, end) range";
    const auto& source = range->items[0];
    if (!is(source, Kind::Tuple, 3) || !is(source->items[2], Kind::Int)) return where + ": malformed source";
    if (table) {
      if (!is(source->items[0], Kind::IntList) || !is(source->items[1], Kind::Int))
        return where + ": malformed source";
      auto outside = [&](int64_t index) { return index < 0 || static_cast<uint64_t>(index) >= texts; };
      for (int64_t index : source->items[0]->ints)
        if (outside(index)) return where + ": text index " + std::to_string(index) + " is out of range";
      if (outside(source->items[1]->number))
        return where + ": file name index " + std::to_string(source->items[1]->number) + " is out of range";
    } else if (!is(source->items[0], Kind::String) ||
               !(is(source->items[1], Kind::String) || is(source->items[1], Kind::None))) {
      return where + ": malformed source";
    }
  }
  return {};
}

/// What in one serialized TorchScript source file (code/**.py) libtorch 1.13's importer would
/// crash on, empty when nothing is: a class-body assignment with a value but no type annotation
/// (`  foo = 3`) other than the four special lists it handles itself. libtorch takes it for a
/// class constant and dereferences the missing annotation (ScriptTypeParser::parseClassConstant,
/// SIGSEGV). Serialized code always writes class constants as `foo : Final[int] = 3`.
std::string sourceProblem(const std::string& text) {
  static const std::set<std::string> kSpecial = {"__parameters__", "__buffers__", "__forward_pre_hooks__",
                                                 "__forward_hooks__"};
  bool inClass = false;
  size_t bodyIndent = 0;  // the class body's indentation, 0 until its first line
  size_t lineNo = 0;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + begin, end - begin);
    begin = end + 1;
    ++lineNo;
    size_t indent = line.find_first_not_of(" \t");
    if (indent == std::string_view::npos || line[indent] == '#') continue;
    if (indent == 0) {
      inClass = line.substr(0, 6) == "class ";
      bodyIndent = 0;
      continue;
    }
    if (!inClass) continue;
    if (bodyIndent == 0) bodyIndent = indent;
    if (indent != bodyIndent) continue;
    size_t nameEnd = indent;
    while (nameEnd < line.size() &&
           (std::isalnum(static_cast<unsigned char>(line[nameEnd])) || line[nameEnd] == '_'))
      ++nameEnd;
    size_t next = line.find_first_not_of(" \t", nameEnd);
    if (nameEnd == indent || next == std::string_view::npos || line[next] != '=' ||
        (next + 1 < line.size() && line[next + 1] == '='))
      continue;
    std::string name(line.substr(indent, nameEnd - indent));
    if (kSpecial.count(name) == 0)
      return "line " + std::to_string(lineNo) + ": class attribute '" + name +
             "' is assigned without a type annotation";
  }
  return {};
}

/// A record whose content is corrupt but that libtorch can do without: a code/**.debug_pkl source
/// map (sourceMapProblem).
struct CorruptRecord {
  std::string name;
  std::string problem;
};

/// Calls `entry(offset of the entry, its name)` for every entry of a zip archive's central
/// directory (where miniz, libtorch's zip reader, looks records up); false when it cannot be walked.
bool forEachCentralEntry(const std::string& zip, const std::function<void(size_t, std::string_view)>& entry) {
  auto little = [&](size_t at, size_t bytes) {
    uint64_t v = 0;
    for (size_t i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(zip[at + i])) << (8 * i);
    return v;
  };
  // The end-of-central-directory record: the last signature within the final 22 + 65535 bytes
  // (a trailing comment), where miniz looks for it.
  constexpr size_t kEnd = 22, kEntry = 46;
  if (zip.size() < kEnd) return false;
  size_t end = zip.size() - kEnd;
  while (little(end, 4) != 0x06054b50) {
    if (end == 0 || zip.size() - end > kEnd + 0xFFFF) return false;
    --end;
  }
  uint64_t count = little(end + 10, 2);
  uint64_t offset = little(end + 16, 4);
  // Zip64: a locator right before it points at the zip64 end record, which holds the real values.
  if (end >= 20 && little(end - 20, 4) == 0x07064b50) {
    uint64_t end64 = little(end - 20 + 8, 8);
    if (end64 > zip.size() || zip.size() - end64 < 56 || little(end64, 4) != 0x06064b50) return false;
    count = little(end64 + 32, 8);
    offset = little(end64 + 48, 8);
  }
  for (uint64_t i = 0; i < count; ++i) {
    if (offset > zip.size() || zip.size() - offset < kEntry || little(offset, 4) != 0x02014b50) return false;
    size_t nameLength = little(offset + 28, 2);
    size_t entryLength = kEntry + nameLength + little(offset + 30, 2) + little(offset + 32, 2);
    if (zip.size() - offset < entryLength) return false;
    entry(offset, std::string_view(zip.data() + offset + kEntry, nameLength));
    offset += entryLength;
  }
  return true;
}

/// A record's name inside the archive's folder (as PyTorchStreamReader lists it), empty if none.
std::string_view recordName(std::string_view entryName) {
  size_t slash = entryName.find('/');
  return slash == std::string_view::npos ? std::string_view() : entryName.substr(slash + 1);
}

/// The uncompressed size of every record, from the central directory (what miniz allocates when
/// libtorch reads it); of duplicate names the smallest. Sizes past 4 GiB (zip64) are left out.
std::unordered_map<std::string, uint64_t> recordSizes(const std::string& zip) {
  std::unordered_map<std::string, uint64_t> sizes;
  forEachCentralEntry(zip, [&](size_t offset, std::string_view name) {
    uint64_t bytes = 0;
    for (size_t i = 0; i < 4; ++i) bytes |= static_cast<uint64_t>(static_cast<unsigned char>(zip[offset + 24 + i])) << (8 * i);
    if (bytes == 0xFFFFFFFF) return;
    auto [it, added] = sizes.emplace(std::string(recordName(name)), bytes);
    if (!added) it->second = std::min(it->second, bytes);
  });
  return sizes;
}

/// Hides records of an archive in memory from libtorch by renaming them in the zip's central
/// directory, where its reader looks names up (miniz does not compare the local headers' copy): the
/// last character of each name becomes '~' (`x.py.debug_pkl` → `x.py.debug_pk~`, which libtorch
/// never asks for). Sizes and offsets do not change. False when the central directory cannot be
/// walked; the caller checks the result with libtorch's own reader.
bool hideRecords(std::string& zip, const std::vector<CorruptRecord>& records) {
  std::vector<size_t> last;  // offsets of the names' last characters
  bool walked = forEachCentralEntry(zip, [&](size_t offset, std::string_view name) {
    for (const CorruptRecord& r : records)
      if (!name.empty() && recordName(name) == r.name) last.push_back(offset + 46 + name.size() - 1);
  });
  for (size_t at : last) zip[at] = '~';
  return walked;
}

/// Checks the archive's pickles (data.pkl, constants.pkl: pickleProblem), its source maps
/// (code/**.debug_pkl, which libtorch unpickles lazily when a node's source location is asked for:
/// sourceMapProblem; corrupt ones are collected in `corruptMaps`) and its code (sourceProblem)
/// before libtorch reads them; empty when they are fine or the archive cannot be opened (jit::load
/// then reports why). An archive whose records cannot all be listed and read is rejected too.
std::string archiveContentProblem(const ArchiveBytes& archive, std::vector<CorruptRecord>& corruptMaps) {
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> open;
  try {
    open = openArchive(archive);
  } catch (const std::exception&) {
    return {};
  }
  caffe2::serialize::PyTorchStreamReader& reader = *open;
  const std::unordered_map<std::string, uint64_t> sizes = recordSizes(*archive);
  try {
    for (const std::string& name : reader.getAllRecords()) {
      auto endsWith = [&](std::string_view suffix) {
        return name.size() >= suffix.size() &&
               name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
      };
      std::string problem;
      if (endsWith(".debug_pkl")) {
        auto [bytes, size] = reader.getRecord(name);
        if (std::string why = sourceMapProblem(static_cast<const uint8_t*>(bytes.get()), size); !why.empty())
          corruptMaps.push_back({name, why});
      } else if (name == "traced_inputs.pkl") {
        // torch >= 2.1 keeps the example inputs of torch.jit.trace here, with empty storage
        // records; libtorch 1.13 never reads it.
        continue;
      } else if (endsWith(".pkl")) {
        // Its tensors' storages are the records <name without .pkl>/<key>.
        const std::string folder = name.substr(0, name.size() - 4) + "/";
        auto storageBytes = [&](std::string_view key) -> std::optional<uint64_t> {
          auto it = sizes.find(folder + std::string(key));
          if (it == sizes.end()) return std::nullopt;
          return it->second;
        };
        auto [bytes, size] = reader.getRecord(name);
        problem = pickleProblem(static_cast<const uint8_t*>(bytes.get()), size, storageBytes);
      } else if (endsWith("pkl")) {
        auto [bytes, size] = reader.getRecord(name);
        problem = pickleProblem(static_cast<const uint8_t*>(bytes.get()), size);
      } else if (endsWith(".py") && name.rfind("code/", 0) == 0) {
        auto [bytes, size] = reader.getRecord(name);
        problem = sourceProblem(std::string(static_cast<const char*>(bytes.get()), size));
      }
      if (!problem.empty()) return "not a TorchScript archive (corrupt " + name + ": " + problem + ")";
    }
  } catch (const std::exception& e) {
    // A record outside the archive's folder, or one that does not decompress: libtorch would read
    // the records it needs regardless, unchecked.
    std::string problem = archiveProblem(archive);
    return problem.empty() ? "not a TorchScript archive (" + torchMessage(e) + ")" : problem;
  }
  return {};
}

/// The name of the first tensor among the loaded module's attributes (of every submodule, inside
/// lists, tuples and objects too) that reaches past its storage, empty when none does: libtorch
/// reads them unchecked when it freezes the module (comparing and folding constants), before the
/// walker's own check of the constants it binds (ts::storageCovers).
std::string tensorOutsideStorage(const jit::Module& module) {
  std::string found;
  for (const auto& attribute : module.named_attributes(/*recurse=*/true)) {
    attribute.value.visit([&](const c10::IValue& v) {
      if (found.empty() && v.isTensor() && !ts::storageCovers(v.toTensor())) found = attribute.name;
      return !found.empty();  // true: skip what it holds
    });
    if (!found.empty()) break;
  }
  return found;
}

}  // namespace

std::shared_ptr<std::string> readFileBytes(const std::string& path) {
  requireFile(path);
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  auto bytes = std::make_shared<std::string>();
  if (in) {
    bytes->resize(static_cast<size_t>(in.tellg()));
    in.seekg(0);
    in.read(bytes->data(), static_cast<std::streamsize>(bytes->size()));
  }
  if (!in) throw Error(path + ": cannot read the file", ErrorKind::Io);
  return bytes;
}

std::unique_ptr<caffe2::serialize::PyTorchStreamReader> openZipInMemory(std::shared_ptr<const std::string> bytes) {
  return std::make_unique<caffe2::serialize::PyTorchStreamReader>(std::make_shared<MemoryReadAdapter>(std::move(bytes)));
}

std::string fileKindProblem(const std::string& path) { return archiveProblem(readArchive(path)); }

std::unordered_map<std::string, uint64_t> zipRecordSizes(const std::string& zip) { return recordSizes(zip); }

jit::Module loadArchive(const std::string& path, jit::ExtraFilesMap& extra) {
  ArchiveBytes archive = readArchive(path);
  // What the file is first (a torch.save archive, not a zip, ...), then whether its records are
  // safe to hand to libtorch.
  if (std::string problem = archiveProblem(archive); !problem.empty())
    throw Error(path + ": " + problem, ErrorKind::InvalidModel);
  std::vector<CorruptRecord> corruptMaps;
  if (std::string problem = archiveContentProblem(archive, corruptMaps); !problem.empty())
    throw Error(path + ": " + problem, ErrorKind::InvalidModel);
  // A corrupt source map costs the source locations only (like a corrupt side table elsewhere):
  // libtorch loads the archive without it, and the nodes of that code file then point at the
  // archive's serialized code. When it cannot be hidden, the archive is rejected.
  if (!corruptMaps.empty()) {
    bool hidden = hideRecords(*archive, corruptMaps);
    try {
      auto reader = openArchive(archive);
      for (const CorruptRecord& r : corruptMaps) hidden = hidden && !reader->hasRecord(r.name);
    } catch (const std::exception&) {
      hidden = false;
    }
    if (!hidden)
      throw Error(path + ": not a TorchScript archive (corrupt " + corruptMaps[0].name + ": " +
                      corruptMaps[0].problem + ")",
                  ErrorKind::InvalidModel);
  }
  jit::Module module;
  try {
    module = jit::load(std::make_shared<MemoryReadAdapter>(archive), c10::Device(c10::kCPU), extra);
  } catch (const std::exception& e) {
    std::string problem = archiveProblem(archive);
    throw Error(path + ": " + (problem.empty() ? "cannot load TorchScript: " + torchMessage(e) : problem),
                ErrorKind::InvalidModel);
  }
  if (std::string name = tensorOutsideStorage(module); !name.empty())
    throw Error(path + ": the weight '" + name + "' reaches past its storage (corrupt archive)",
                ErrorKind::InvalidModel);
  return module;
}

}  // namespace kiln::importers::ts
