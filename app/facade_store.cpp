// The session store through the façade: opening it for measuring commands, listing and showing
// sessions, diffing two builds per operator, and reports.
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "app/facade.h"
#include "app/facade_internal.h"
#include "app/measure_internal.h"
#include "profiler/context.h"
#include "profiler/op_profile.h"
#include "profiler/report.h"
#include "profiler/sha256.h"

namespace kiln::app {

std::string resolveDbPath(const std::string& dbPath) {
  return dbPath.empty() ? profiler::Store::defaultPath() : dbPath;
}

std::unique_ptr<profiler::Store> openStoreFor(const StoreOptions& options) {
  if (!options.enabled) return nullptr;
  auto store = std::make_unique<profiler::Store>(resolveDbPath(options.dbPath));
  if (options.session > 0 && !store->hasSession(options.session))
    throw Error(store->path() + ": no session " + std::to_string(options.session), ErrorKind::Usage);
  return store;
}

StoredIds beginStoredRun(profiler::Store& store, const StoreOptions& options, const std::string& modelPath,
                         const std::string& modelName, const std::string& kind,
                         const profiler::RunContext& context) {
  std::error_code ec;
  auto size = std::filesystem::file_size(modelPath, ec);
  std::string absolute = std::filesystem::absolute(modelPath, ec).lexically_normal().string();
  int64_t modelId =
      store.addModel(profiler::sha256File(modelPath), modelName, absolute.empty() ? modelPath : absolute,
                     ec ? 0 : static_cast<int64_t>(size));
  StoredIds ids;
  ids.dbPath = store.path();
  ids.sessionId = store.sessionFor(modelId, options.session);
  ids.runId = store.addRun(ids.sessionId, kind, context);
  return ids;
}

profiler::RunContext runContextFor(const BuildOptions& build, int threads, const std::string& target,
                                   double compileSeconds) {
  profiler::RunContext c = profiler::hostContext();
  c.threads = threads;
  c.target = target;
  c.optLevel = build.optLevel;
  c.kilnVersion = version();
  c.compileSeconds = compileSeconds;
  if (!build.records.empty()) c.tuningRecords = build.records;
  return c;
}

profiler::BuildRecord buildRecordOf(const CompiledModel& compiled, int threads, int64_t batch) {
  profiler::BuildRecord b;
  b.target = compiled.targetString;
  b.optLevel = compiled.options.optLevel;
  b.threads = threads;
  b.batch = batch;
  b.compileSeconds = compiled.compileSeconds;
  b.numKernels = compiled.numKernels;
  b.numCalls = compiled.numCalls;
  b.planBytes = static_cast<int64_t>(compiled.planBytes);
  if (!compiled.options.records.empty()) b.tuningRecords = compiled.options.records;
  return b;
}

int64_t modelBatch(const Model& model) {
  return model.inputs.empty() || model.inputs[0].shape.empty() ? 1 : model.inputs[0].shape[0];
}

bool looksOutOfMemory(const std::string& m) {
  return m.find("out of memory") != std::string::npos ||
         m.find("can't allocate memory") != std::string::npos || m.find("bad_alloc") != std::string::npos;
}

std::string contextJson(const profiler::RunContext& c) { return toJson(c).dump(); }

// ---- reading the store ------------------------------------------------------------------------

namespace {

/// Opens an existing store for reading commands; a missing file is an error naming the path.
std::unique_ptr<profiler::Store> openExisting(const std::string& dbPath) {
  std::string path = resolveDbPath(dbPath);
  if (!std::filesystem::exists(path))
    throw Error(path + ": no session store yet (kiln compare, profile and sweep create it)", ErrorKind::Io);
  return std::make_unique<profiler::Store>(path);
}

}  // namespace

Result<std::vector<profiler::SessionSummary>> listSessions(const std::string& dbPath) {
  return guarded<std::vector<profiler::SessionSummary>>("", [&] {
    if (!std::filesystem::exists(resolveDbPath(dbPath))) return std::vector<profiler::SessionSummary>{};
    return openExisting(dbPath)->listSessions();
  });
}

Result<profiler::SessionData> loadSession(const std::string& dbPath, int64_t sessionId) {
  return guarded<profiler::SessionData>("", [&] {
    auto store = openExisting(dbPath);
    auto data = store->loadSession(sessionId);
    if (!data) throw Error(store->path() + ": no session " + std::to_string(sessionId), ErrorKind::Usage);
    return std::move(*data);
  });
}

Result<BuildDiff> diffBuilds(const std::string& dbPath, int64_t buildA, int64_t buildB) {
  return guarded<BuildDiff>("", [&] {
    auto store = openExisting(dbPath);
    BuildDiff d;
    d.buildA = buildA;
    d.buildB = buildB;
    std::optional<profiler::StoredProfile> pa, pb;
    for (auto [id, record, profile] : {std::tuple{buildA, &d.a, &pa}, std::tuple{buildB, &d.b, &pb}}) {
      auto build = store->build(id);
      if (!build) throw Error(store->path() + ": no build " + std::to_string(id), ErrorKind::Usage);
      *record = build->build;
      *profile = store->latestProfile(id);
      if (!*profile)
        throw Error(store->path() + ": build " + std::to_string(id) +
                        " has no per-operator profile (kiln sessions show lists the profiled builds)",
                    ErrorKind::Usage);
    }
    d.endToEndMsA = pa->profile.endToEnd.medianMs;
    d.endToEndMsB = pb->profile.endToEnd.medianMs;
    d.sumMsA = pa->profile.sumMs;
    d.sumMsB = pb->profile.sumMs;
    d.profileA = pa->profile;
    d.profileB = pb->profile;
    d.ceilingsA = store->ceilingsOfRun(pa->runId);
    d.ceilingsB = store->ceilingsOfRun(pb->runId);

    std::map<std::string, const profiler::OpRecord*> inA;
    for (const auto& op : pa->profile.ops) inA[op.key] = &op;
    std::set<std::string> matched;
    for (const auto& op : pb->profile.ops) {
      OpDiffRow row;
      row.key = op.key;
      row.opsB = profiler::joinOps(op.ops);
      row.kernelB = op.kernel;
      row.timeUsB = op.timeUs;
      auto it = inA.find(op.key);
      if (it == inA.end()) {
        row.change = "only in B";
      } else {
        matched.insert(op.key);
        row.opsA = profiler::joinOps(it->second->ops);
        row.kernelA = it->second->kernel;
        row.timeUsA = it->second->timeUs;
        if (row.opsA != row.opsB)
          row.change = "fused differently";
        else if (row.kernelA != row.kernelB)
          row.change = "kernel renamed";
      }
      d.rows.push_back(std::move(row));
    }
    for (const auto& op : pa->profile.ops) {
      if (matched.count(op.key)) continue;
      OpDiffRow row;
      row.key = op.key;
      row.opsA = profiler::joinOps(op.ops);
      row.kernelA = op.kernel;
      row.timeUsA = op.timeUs;
      row.change = "only in A";
      d.rows.push_back(std::move(row));
    }
    return d;
  });
}

Result<std::string> sessionReport(const std::string& dbPath, int64_t sessionId, ReportFormat format,
                                  int topN) {
  auto data = loadSession(dbPath, sessionId);
  if (!data) return data.error();
  return guarded<std::string>("", [&] {
    if (format == ReportFormat::Csv) return profiler::sessionReportCsv(data.value());
    profiler::ReportOptions options;
    options.topN = topN;
    return profiler::sessionReportHtml(data.value(), options);
  });
}

Result<PreparedMeasurement> prepareMeasurement(const std::string& path, const OpenOptions& open,
                                               const BuildOptions& build, const StoreOptions& storeOptions) {
  PreparedMeasurement prepared;
  auto opened = guarded<bool>(path, [&] {
    prepared.store = openStoreFor(storeOptions);
    return true;
  });
  if (!opened) return opened.error();
  auto model = openModel(path, open);
  if (!model) return model.error();
  auto compiled = app::build(model.value(), build);
  if (!compiled) return compiled.error();
  prepared.model = model.value();
  prepared.compiled = compiled.value();
  return prepared;
}

}  // namespace kiln::app
