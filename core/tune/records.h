// Tuning records: one JSON object per line, one line per measured candidate (AutoTVM's log
// format is the model). A record names the workload by its tuning key and the target by its
// canonical string, so a file can collect records of many models and machines; lowering takes
// one error-free record per key for the build's target (bestConfigs: confirmed ones first).
//
//   {"key":"conv2d_nchwc:n=1,...:f32","target":"llvm -mcpu=skylake-avx512",
//    "knobs":"mi=14,oc_vecs=2,po=1","cost_ms":0.0412,
//    "costs_ms":[0.0413,0.0412,0.0415],"error":"","tuner":"xgb","timestamp":"2026-11-21T23:59:01Z",
//    "version":"0.1.0"}
//
// A matmul or dense_packed sketch record (core/lower/gemm_search.h) also has "trace": the schedule primitives
// that build its kernel from the plain loop nest, one step per line; a record whose trace does not parse is
// skipped like a torn line (readRecords counts it and names its line), one that parses but does not replay
// stops the build with one line naming the key.
//
// Files are only appended to, a line at a time and flushed, so a run killed mid-write leaves at
// most one torn last line; readers skip (and count) lines that do not parse instead of failing.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/lower/schedule_config.h"

namespace kiln::core::tune {

struct TuneRecord {
  std::string key;
  std::string target;
  lower::Knobs knobs;
  /// The schedule trace (core/tir/trace.h text) of a primitive-scheduled kernel (matmul, dense_packed): the
  /// build replays it on the kernel's plain nest. "" for knob-only records (every older record).
  std::string trace;
  double costMs = 0;             // median of costsMs; 0 when the candidate failed
  std::vector<double> costsMs;   // per repeat
  std::string error;             // "" when the candidate ran and matched the reference
  std::string tuner;
  std::string timestamp;         // UTC, ISO 8601
  std::string version;           // Kiln's
  /// A confirmation round's record of the build's untuned configuration (JSON "default": true).
  bool isDefault = false;
  bool ok() const { return error.empty() && costMs > 0; }
};

std::string recordJson(const TuneRecord& record);
/// Parses one line; returns false (with `why`) for a line that is not a record.
bool parseRecord(std::string_view line, TuneRecord& record, std::string* why = nullptr);

struct RecordFile {
  std::vector<TuneRecord> records;
  int badLines = 0;          // skipped: not JSON, or not a record
  std::string firstProblem;  // "line 7: ..." for the first bad line
};
/// Reads a records file; a missing file reads as empty. Throws kiln::Error (Io) when it exists
/// but cannot be read.
RecordFile readRecords(const std::string& path);
/// Appends records with one write() per line (O_APPEND); starts a new line first when the file
/// ends in a torn one; creates the file (and its folder).
void appendRecords(const std::string& path, const std::vector<TuneRecord>& records);

/// The `tuner` of records written by a confirmation round: after a task's search, its best few
/// configurations and the default are measured again side by side (their repeats alternating),
/// and the round's records share one timestamp. Costs measured minutes apart on a shared machine
/// drift by tens of percent, so a search's fastest record can owe its place to a quiet moment;
/// a round's costs are comparable with each other.
inline constexpr const char* kConfirmTuner = "confirm";

/// How much faster than the default a round's fastest configuration must be to replace it. A
/// round's costs still differ by a few percent from run to run, and the model runs a kernel with
/// colder caches than the worker that times it back to back: a configuration that only ties
/// the default (on ResNet-18, a Winograd layer's other loop order at 0.2 % faster, 1.6× slower
/// in the model: every thread streams all of its weights) is not worth the swap.
inline constexpr double kDefaultMargin = 0.03;
/// The record one round of one key chooses among `round` (its error-free records): the fastest,
/// unless the round's default (isDefault) is within kDefaultMargin of it; without a flagged
/// default (older records), the fastest. Null when `round` is empty. Builds (bestConfigs), the
/// tuning loop's summary and reruns (tune_loop.h) all choose through this.
const TuneRecord* roundChoice(const std::vector<const TuneRecord*>& round);

/// The chosen record per key for `target` (all targets when empty): the fastest error-free
/// record of the key's latest confirmation round when it has one (the round's default unless the
/// fastest beats it by kDefaultMargin), else the fastest error-free record of all.
lower::ScheduleConfigs bestConfigs(const std::vector<TuneRecord>& records, const std::string& target);

/// The records that decide each key's choice in bestConfigs: the key's latest confirmation round
/// whole, else its fastest error-free record. bestConfigs of these alone chooses as of all.
std::vector<TuneRecord> decidingRecords(const std::vector<TuneRecord>& records, const std::string& target);

}  // namespace kiln::core::tune
