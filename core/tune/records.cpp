// Tuning records as JSON lines; see records.h.
#include "core/tune/records.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "core/tir/trace.h"
#include "runtime/error.h"

namespace kiln::core::tune {

std::string recordJson(const TuneRecord& r) {
  nlohmann::json j;
  j["key"] = r.key;
  j["target"] = r.target;
  j["knobs"] = lower::knobsText(r.knobs);
  if (!r.trace.empty()) j["trace"] = r.trace;
  j["cost_ms"] = r.costMs;
  j["costs_ms"] = r.costsMs;
  j["error"] = r.error;
  j["tuner"] = r.tuner;
  if (r.isDefault) j["default"] = true;
  j["timestamp"] = r.timestamp;
  j["version"] = r.version;
  return j.dump();
}

bool parseRecord(std::string_view line, TuneRecord& r, std::string* why) {
  auto fail = [&](const std::string& message) {
    if (why) *why = message;
    return false;
  };
  nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return fail("not a JSON object");
  try {
    r = TuneRecord{};
    r.key = j.at("key").get<std::string>();
    lower::parseTuneKey(r.key);
    r.target = j.at("target").get<std::string>();
    r.knobs = lower::parseKnobs(j.at("knobs").get<std::string>());
    r.trace = j.value("trace", "");
    r.costMs = j.at("cost_ms").get<double>();
    if (j.contains("costs_ms")) r.costsMs = j["costs_ms"].get<std::vector<double>>();
    r.error = j.value("error", "");
    r.tuner = j.value("tuner", "");
    r.isDefault = j.value("default", false);
    r.timestamp = j.value("timestamp", "");
    r.version = j.value("version", "");
  } catch (const nlohmann::json::exception& e) {
    return fail(std::string("missing or mistyped field (") + e.what() + ")");
  } catch (const Error& e) {
    return fail(e.what());
  }
  if (!(r.costMs >= 0)) return fail("negative cost");
  if (!r.trace.empty()) {
    try {
      tir::Trace::parse(r.trace);
    } catch (const Error& e) {
      return fail("the trace of '" + r.key + "' does not parse: " + e.what());
    }
  }
  return true;
}

RecordFile readRecords(const std::string& path) {
  RecordFile file;
  if (!std::filesystem::exists(path)) return file;
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot read the tuning records", ErrorKind::Io);
  std::string line, why;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    TuneRecord r;
    if (parseRecord(line, r, &why)) {
      file.records.push_back(std::move(r));
      continue;
    }
    if (file.badLines++ == 0) file.firstProblem = "line " + std::to_string(number) + ": " + why;
  }
  return file;
}

void appendRecords(const std::string& path, const std::vector<TuneRecord>& records) {
  std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);  // read: the last byte
  if (fd < 0) throw Error(path + ": cannot write the tuning records: " + std::strerror(errno), ErrorKind::Io);
  // A torn last line (a run killed mid-write) must not glue onto the next record: start a new one.
  struct stat st {};
  bool needNewline = false;
  if (::fstat(fd, &st) == 0 && st.st_size > 0) {
    char last = '\n';
    needNewline = ::pread(fd, &last, 1, st.st_size - 1) == 1 && last != '\n';
  }
  // One write() per record, with O_APPEND: a kill leaves whole lines and at most one torn last
  // line, which readRecords() skips and counts. No fsync: a killed process loses nothing that
  // write() returned (the kernel holds it), the same guarantee as the store's synchronous=NORMAL.
  auto writeAll = [&](const std::string& data) {
    size_t done = 0;
    while (done < data.size()) {
      ssize_t n = ::write(fd, data.data() + done, data.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    return true;
  };
  bool ok = true;
  for (size_t i = 0; i < records.size() && ok; ++i)
    ok = writeAll((i == 0 && needNewline ? "\n" : "") + recordJson(records[i]) + "\n");
  ::close(fd);
  if (!ok) throw Error(path + ": writing the tuning records failed", ErrorKind::Io);
}

std::vector<TuneRecord> decidingRecords(const std::vector<TuneRecord>& records, const std::string& target) {
  auto usable = [&](const TuneRecord& r) { return r.ok() && (target.empty() || r.target == target); };
  // The latest confirmation round of each key (ISO 8601 timestamps order as text).
  std::map<std::string, std::string> latestRound;
  for (const TuneRecord& r : records) {
    if (!usable(r) || r.tuner != kConfirmTuner) continue;
    std::string& latest = latestRound[r.key];
    latest = std::max(latest, r.timestamp);
  }
  std::vector<TuneRecord> out;
  std::map<std::string, size_t> fastest;  // key -> index in out, for keys without a round
  for (const TuneRecord& r : records) {
    if (!usable(r)) continue;
    auto round = latestRound.find(r.key);
    if (round != latestRound.end()) {
      if (r.tuner == kConfirmTuner && r.timestamp == round->second) out.push_back(r);
      continue;
    }
    auto [it, fresh] = fastest.emplace(r.key, out.size());
    if (fresh)
      out.push_back(r);
    else if (r.costMs < out[it->second].costMs)
      out[it->second] = r;
  }
  return out;
}

const TuneRecord* roundChoice(const std::vector<const TuneRecord*>& round) {
  const TuneRecord *fastest = nullptr, *byDefault = nullptr;
  for (const TuneRecord* r : round) {
    if (!fastest || r->costMs < fastest->costMs) fastest = r;
    if (r->isDefault) byDefault = r;
  }
  const bool keep =
      byDefault && byDefault->costMs > 0 && fastest->costMs * (1 + kDefaultMargin) > byDefault->costMs;
  return keep ? byDefault : fastest;
}

lower::ScheduleConfigs bestConfigs(const std::vector<TuneRecord>& records, const std::string& target) {
  std::vector<TuneRecord> deciding = decidingRecords(records, target);
  std::map<std::string, std::vector<const TuneRecord*>> byKey;
  for (const TuneRecord& r : deciding) byKey[r.key].push_back(&r);
  lower::ScheduleConfigs configs;
  for (const auto& [key, round] : byKey) {
    const TuneRecord* r = roundChoice(round);
    configs.byKey[key] = r->knobs;
    if (!r->trace.empty()) configs.traces[key] = r->trace;
  }
  return configs;
}

}  // namespace kiln::core::tune
