// kiln profile: a per-operator profile of one build (debug executor) with the end-to-end time
// beside it, stored in the session store.
#include <nlohmann/json.hpp>

#include "app/facade.h"
#include "app/facade_internal.h"
#include "app/measure_internal.h"
#include "profiler/ceilings.h"
#include "profiler/op_profile.h"
#include "runtime/graph_executor.h"
#include "runtime/thread_pool.h"

namespace kiln::app {

namespace {

/// Profiles a prepared build in this process (the worker's and the in-process path alike).
ProfileResult profileHere(const std::string& path, const ProfileOptions& options, PreparedMeasurement& prepared) {
  const Model& m = *prepared.model;
  CompiledModel& c = *prepared.compiled;
  int threads = options.build.threads > 0 ? options.build.threads : runtime::numThreads();
  runtime::setNumThreads(threads);

  ProfileResult r;
  r.model = m.name;
  r.modelPath = path;
  r.context = runContextFor(options.build, threads, c.targetString, c.compileSeconds);
  r.build = buildRecordOf(c, threads, modelBatch(m));
  r.numFusedFunctions = c.numFusedFunctions;

  std::vector<runtime::Tensor> inputs = randomInputs(m);
  for (size_t i = 0; i < inputs.size(); ++i) c.executor->setInput(static_cast<int>(i), inputs[i]);
  profiler::ProfileOptions po;
  po.warmup = options.warmup;
  po.repeat = options.repeat;
  po.minRepeatMs = options.minRepeatMs;
  r.profile = profiler::profileExecutor(*c.executor, c.graph, po);
  return r;
}

/// The machine ceilings a profile refers to: with options.roofline found or measured (before the
/// profile, so the machine is quiet), else only looked up in the store.
struct FoundCeilings {
  std::optional<profiler::MachineCeilings> ceilings;
  bool reused = false;
};

FoundCeilings ceilingsForProfile(profiler::Store* store, const ProfileOptions& options, int threads) {
  if (options.roofline) {
    // Isolated profiles measure them in a worker too: in the Workbench other jobs share this
    // process and its thread pool.
    profiler::MeasureCeilingsFn measure;
    if (options.isolate.enabled)
      measure = [&](int t) { return measureCeilingsIsolated(t, options.isolate); };
    else
      measure = [](int t) { return profiler::measureCeilings(t); };
    profiler::CeilingsLookup found = profiler::ceilingsFor(store, threads, options.remeasureCeilings, measure);
    return {std::move(found.ceilings), found.reused};
  }
  if (!store) return {};
  auto stored = store->latestCeilings(profiler::machineKey(), threads);
  bool have = stored.has_value();
  return {std::move(stored), have};
}

int profileThreads(const ProfileOptions& options) {
  return options.build.threads > 0 ? options.build.threads : runtime::numThreads();
}

/// Puts the ceilings (if any) into the result and its run context, and the roofline if asked for.
void applyCeilings(profiler::Store* store, const ProfileOptions& options, FoundCeilings found, ProfileResult& r) {
  if (found.ceilings && found.ceilings->threads != r.context.threads)
    found = ceilingsForProfile(store, options, r.context.threads);  // the worker chose another count
  if (!found.ceilings) return;
  r.context.ceilingsId = found.ceilings->id;
  r.ceilings = std::move(found.ceilings);
  r.ceilingsReused = found.reused;
  if (options.roofline) r.roofline = profiler::rooflineOf(r.profile, *r.ceilings);
}

/// Files the profile in the store: one transaction, so a kill leaves all of it or none.
void storeProfile(profiler::Store& store, const ProfileOptions& options, const std::string& path, ProfileResult& r) {
  r.stored = store.transaction([&] {
    StoredIds ids = beginStoredRun(store, options.store, path, r.model, "profile", r.context);
    ids.buildId = store.addBuild(ids.runId, r.build);
    profiler::Measurement e2e;
    e2e.backend = "kiln";
    e2e.batch = r.profile.batch;
    e2e.timing = r.profile.endToEnd;
    store.addMeasurement(ids.runId, ids.buildId, 0, e2e);
    store.addProfile(ids.runId, ids.buildId, r.profile);
    return ids;
  });
}

nlohmann::json profileRequest(const std::string& path, const ProfileOptions& o) {
  nlohmann::json q = {{"op", "profile"},  {"path", path},
                      {"batch", o.batch}, {"warmup", o.warmup},
                      {"repeat", o.repeat}, {"min_repeat_ms", o.minRepeatMs},
                      {"build", toJson(o.build)}};
  if (!o.inputs.empty()) q["input_specs"] = toJson(o.inputs);
  return q;
}

OpenOptions openOptionsOf(const ProfileOptions& o) {
  OpenOptions open;
  open.batch = o.batch;
  open.inputs = o.inputs;
  return open;
}

/// profile() in a `kiln measure-worker`; the store is written here, by the caller.
Result<ProfileResult> profileIsolated(const std::string& path, const ProfileOptions& options) {
  std::unique_ptr<profiler::Store> store;
  try {
    store = openStoreFor(options.store);  // a bad database fails before anything runs
  } catch (const Error& e) {
    return Diagnostic{e.what(), e.kind()};
  }
  // A Python reference is traced here, once: the worker and the store get the traced file.
  auto source = guarded<ResolvedSource>(path, [&] { return resolveSource(path); });
  if (!source) return source.error();
  const std::string& file = source->file;
  auto found = guarded<FoundCeilings>(path, [&] { return ceilingsForProfile(store.get(), options, profileThreads(options)); });
  if (!found) return found.error();
  auto reply = callMeasureWorker(profileRequest(file, options), options.isolate);
  if (!reply) {
    const Diagnostic& d = reply.error();
    // The worker's own errors already name the model.
    std::string message = d.message;
    if (file != path && message.rfind(file + ": ", 0) == 0) message = message.substr(file.size() + 2);
    return Diagnostic{message.rfind(path, 0) == 0 ? message : path + ": " + message, d.kind};
  }
  return guarded<ProfileResult>(path, [&] {
    const nlohmann::json& j = reply.value();
    ProfileResult r;
    r.model = j.at("model").get<std::string>();
    r.modelPath = j.at("model_path").get<std::string>();
    r.context = runContextFromJson(j.at("context"));
    r.build = buildRecordFromJson(j.at("build"));
    r.numFusedFunctions = j.at("fused_functions").get<int>();
    r.profile = profileRecordFromJson(j.at("profile"));
    if (file != path) {
      r.model = source->name;
      r.modelPath = path;
    }
    applyCeilings(store.get(), options, std::move(found.value()), r);
    if (store) storeProfile(*store, options, file, r);
    return r;
  });
}

}  // namespace

nlohmann::json serveProfileRequest(const nlohmann::json& q) {
  ProfileOptions o;
  std::string path = q.at("path").get<std::string>();
  o.batch = q.at("batch").get<int64_t>();
  o.warmup = q.at("warmup").get<int>();
  o.repeat = q.at("repeat").get<int>();
  o.minRepeatMs = q.at("min_repeat_ms").get<double>();
  o.build = buildOptionsFromJson(q.at("build"));
  if (q.contains("input_specs")) o.inputs = inputSpecsFromJson(q["input_specs"]);
  o.store.enabled = false;
  auto prepared = prepareMeasurement(path, openOptionsOf(o), o.build, o.store);
  if (!prepared) throw Error(prepared.error().message, prepared.error().kind);
  workerMeasuring();
  ProfileResult r = profileHere(path, o, prepared.value());
  return {{"model", r.model},
          {"model_path", r.modelPath},
          {"context", toJson(r.context)},
          {"build", toJson(r.build)},
          {"fused_functions", r.numFusedFunctions},
          {"profile", toJson(r.profile)}};
}

Result<ProfileResult> profile(const std::string& path, const ProfileOptions& options) {
  if (options.repeat < 1) return Diagnostic{path + ": --repeat must be at least 1", ErrorKind::Usage};
  if (options.isolate.enabled) return profileIsolated(path, options);
  auto prepared = prepareMeasurement(path, openOptionsOf(options), options.build, options.store);
  if (!prepared) return prepared.error();
  return guarded<ProfileResult>(path, [&] {
    FoundCeilings found = ceilingsForProfile(prepared->store.get(), options, profileThreads(options));
    ProfileResult r = profileHere(path, options, prepared.value());
    applyCeilings(prepared->store.get(), options, std::move(found), r);
    if (prepared->store) storeProfile(*prepared->store, options, prepared->model->path, r);
    return r;
  });
}

std::vector<profiler::OpRecord> operatorSummary(const profiler::ProfileRecord& profile) {
  return profiler::groupByOperator(profile.ops);
}

std::string profileResultJson(const ProfileResult& r) {
  nlohmann::json j = nlohmann::json::parse(profiler::profileJson(r.profile));
  j["model"] = r.model;
  j["model_path"] = r.modelPath;
  j["context"] = toJson(r.context);
  j["build"] = {{"target", r.build.target},
                {"opt_level", r.build.optLevel},
                {"threads", r.build.threads},
                {"batch", r.build.batch},
                {"num_kernels", r.build.numKernels},
                {"num_calls", r.build.numCalls},
                {"fused_functions", r.numFusedFunctions},
                {"compile_seconds", r.build.compileSeconds},
                {"plan_bytes", r.build.planBytes}};
  if (r.ceilings) j["ceilings"] = nlohmann::json::parse(ceilingsJson(*r.ceilings, r.ceilingsReused));
  if (!r.roofline.empty()) {
    nlohmann::json rows = nlohmann::json::array();
    for (const profiler::RooflinePoint& p : r.roofline)
      rows.push_back({{"call", p.call},
                      {"name", p.name},
                      {"key", p.key},
                      {"ops", p.ops},
                      {"flops", p.flops},
                      {"bytes", p.bytes},
                      {"time_us", p.timeUs},
                      {"percent_of_time", p.percentOfTime},
                      {"intensity", p.intensity},
                      {"gflops", p.gflops},
                      {"gb_per_second", p.gbPerSecond},
                      {"level", p.level},
                      {"bandwidth_gb_per_second", p.bandwidth},
                      {"bound_gflops", p.boundGflops},
                      {"percent_of_bound", p.percentOfBound},
                      {"bound", p.memoryBound ? "memory" : "compute"}});
    j["roofline"] = rows;
  }
  if (r.stored.sessionId)
    j["stored"] = {{"db", r.stored.dbPath},
                   {"session", r.stored.sessionId},
                   {"run", r.stored.runId},
                   {"build", r.stored.buildId}};
  return j.dump(2);
}

std::string profileTraceJson(const ProfileResult& r) {
  return profiler::chromeTraceJson(r.profile, "kiln " + r.model + " (" + r.build.target + ", -O" +
                                                  std::to_string(r.build.optLevel) + ", batch " +
                                                  std::to_string(r.build.batch) + ")");
}

}  // namespace kiln::app
