// kiln profile: a per-operator profile of one build (debug executor) with the end-to-end time
// beside it, stored in the session store.
#include <nlohmann/json.hpp>

#include "app/facade.h"
#include "app/facade_internal.h"
#include "app/measure_internal.h"
#include "profiler/op_profile.h"
#include "runtime/graph_executor.h"
#include "runtime/thread_pool.h"

namespace kiln::app {

Result<ProfileResult> profile(const std::string& path, const ProfileOptions& options) {
  if (options.repeat < 1) return Diagnostic{path + ": --repeat must be at least 1", ErrorKind::Usage};
  auto prepared = prepareMeasurement(path, options.batch, options.build, options.store);
  if (!prepared) return prepared.error();
  std::unique_ptr<profiler::Store>& store = prepared->store;
  return guarded<ProfileResult>(path, [&] {
    const Model& m = *prepared->model;
    CompiledModel& c = *prepared->compiled;
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

    if (store) {
      r.stored = store->transaction([&] {
        StoredIds ids = beginStoredRun(*store, options.store, path, m.name, "profile", r.context);
        ids.buildId = store->addBuild(ids.runId, r.build);
        profiler::Measurement e2e;
        e2e.backend = "kiln";
        e2e.batch = r.profile.batch;
        e2e.timing = r.profile.endToEnd;
        store->addMeasurement(ids.runId, ids.buildId, 0, e2e);
        store->addProfile(ids.runId, ids.buildId, r.profile);
        return ids;
      });
    }
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
  j["context"] = nlohmann::json::parse(contextJson(r.context));
  j["build"] = {{"target", r.build.target},
                {"opt_level", r.build.optLevel},
                {"threads", r.build.threads},
                {"batch", r.build.batch},
                {"num_kernels", r.build.numKernels},
                {"num_calls", r.build.numCalls},
                {"fused_functions", r.numFusedFunctions},
                {"compile_seconds", r.build.compileSeconds},
                {"plan_bytes", r.build.planBytes}};
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
