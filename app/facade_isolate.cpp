// Isolated measurements: the façade's side of `kiln measure-worker`. A worker serves either one
// profile request (profiler/measure_worker.h: it runs the ordinary in-process profile() and sends
// the result back in the exact JSON forms below, so an isolated result equals an in-process one)
// or, when its first request is a "setup", one backend of a side-by-side measurement
// (profiler/bench.h, facade_bench.cpp).
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include <nlohmann/json.hpp>

#include "app/facade.h"
#include "app/facade_internal.h"
#include "app/measure_internal.h"
#include "profiler/measure_worker.h"

namespace kiln::app {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<std::string> workerArgv(const std::string& command, const std::string& subcommand) {
  if (!command.empty()) return {command, subcommand};
  for (const char* env : {"KILN_WORKER", "KILN_TUNE_WORKER"})
    if (const char* value = std::getenv(env); value && *value) return {value, subcommand};
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    if (self.filename() == "kiln") return {self.string(), subcommand};
    // Beside this program, one folder up (the workbench in app/gui/), or in app/ (tests/).
    for (const fs::path& dir :
         {self.parent_path(), self.parent_path().parent_path(), self.parent_path().parent_path() / "app"})
      if (fs::exists(dir / "kiln")) return {(dir / "kiln").string(), subcommand};
  }
  return {"kiln", subcommand};
}

Result<json> callMeasureWorker(const json& request, const IsolationOptions& isolation,
                               const std::function<bool()>& cancelled) {
  // The caller's own predicate wins; else the one the options carry (so no call site passes it).
  const std::function<bool()>& stop = cancelled ? cancelled : isolation.cancelled;
  if (stop && stop()) return Diagnostic{"cancelled", ErrorKind::Usage};
  profiler::IsolationLimits limits;
  limits.measureSeconds = isolation.timeoutSeconds > 0 ? isolation.timeoutSeconds : 30;
  limits.compileSeconds = isolation.compileTimeoutSeconds > 0 ? isolation.compileTimeoutSeconds : 600;
  profiler::IsolatedRun run = profiler::runIsolated(workerArgv(isolation.workerCommand, "measure-worker"),
                                                    request.dump(), limits, stop);
  if (!run.ok()) {
    ErrorKind kind = run.crashed || run.timedOut ? ErrorKind::KernelFault
                     : run.failure == "cancelled" ? ErrorKind::Usage
                                                  : ErrorKind::Internal;
    return Diagnostic{run.failure, kind};
  }
  json reply = json::parse(run.reply, nullptr, false);
  if (reply.is_discarded() || !reply.is_object())
    return Diagnostic{"the measuring worker sent a malformed reply", ErrorKind::Internal};
  if (!reply.value("ok", false))
    return Diagnostic{reply.value("error", std::string("the measuring worker failed")),
                      static_cast<ErrorKind>(reply.value("kind", static_cast<int>(ErrorKind::Internal)))};
  return reply.value("result", json::object());
}

void workerMeasuring() { profiler::sendWorkerLine(R"({"event":"measuring"})"); }

int runMeasureWorker() {
  profiler::installWorkerFaultHandlers();
  std::string line;
  if (!std::getline(std::cin, line)) return 2;
  json reply;
  try {
    json request = json::parse(line);
    std::string op = request.at("op").get<std::string>();
    // A side-by-side worker (profiler/bench.h): one backend, many requests.
    if (op == "setup") return serveBenchWorker(line);
    if (op == "profile")
      reply = {{"ok", true}, {"result", serveProfileRequest(request)}};
    else if (op == "ceilings")
      reply = {{"ok", true}, {"result", serveCeilingsRequest(request)}};
    else
      throw Error("unknown request '" + op + "'", ErrorKind::Usage);
  } catch (const Error& e) {
    reply = {{"ok", false}, {"error", e.what()}, {"kind", static_cast<int>(e.kind())}};
  } catch (const std::exception& e) {
    reply = {{"ok", false}, {"error", std::string("internal error: ") + e.what()},
             {"kind", static_cast<int>(ErrorKind::Internal)}};
  }
  profiler::sendWorkerLine(reply.dump());
  return 0;
}

BenchSpec benchSpecOf(const Model& model, bool explicitShapes) {
  BenchSpec spec;
  spec.path = model.path;
  if (explicitShapes) spec.inputSpecs = model.inputs;
  spec.pythonRef = model.pythonRef;
  spec.stateDict = model.stateDict;
  return spec;
}

// ---- JSON forms ---------------------------------------------------------------------------------

json toJson(const std::vector<InputSpec>& specs) {
  json j = json::array();
  for (const InputSpec& s : specs) j.push_back({{"name", s.name}, {"shape", s.shape}, {"dtype", inputDTypeName(s.dtype)}});
  return j;
}

std::vector<InputSpec> inputSpecsFromJson(const json& j) {
  std::vector<InputSpec> specs;
  for (const json& e : j) {
    std::string dtype = e.at("dtype").get<std::string>();
    auto parsed = parseInputDType(dtype);
    if (!parsed) throw Error("unknown input dtype '" + dtype + "'", ErrorKind::Usage);
    InputSpec s;
    s.name = e.at("name").get<std::string>();
    s.shape = e.at("shape").get<std::vector<int64_t>>();
    s.dtype = *parsed;
    specs.push_back(std::move(s));
  }
  return specs;
}

json toJson(const BuildOptions& b) {
  json j = {{"target", b.target},   {"opt_level", b.optLevel}, {"threads", b.threads},
            {"skip", b.skipPasses}, {"verify", b.verifyPasses}, {"records", b.records}};
  if (b.passes) j["passes"] = *b.passes;
  if (b.winograd != 4) j["winograd"] = b.winograd;
  return j;
}

BuildOptions buildOptionsFromJson(const json& j) {
  BuildOptions b;
  b.target = j.at("target").get<std::string>();
  b.optLevel = j.at("opt_level").get<int>();
  b.threads = j.at("threads").get<int>();
  b.skipPasses = j.at("skip").get<std::vector<std::string>>();
  b.verifyPasses = j.at("verify").get<bool>();
  b.records = j.at("records").get<std::string>();
  if (j.contains("passes")) b.passes = j["passes"].get<std::string>();
  b.winograd = j.value("winograd", 4);
  return b;
}

json toJson(const profiler::RunContext& c) {
  return {{"cpu", c.cpu},
          {"physical_cores", c.physicalCores},
          {"hardware_threads", c.hardwareThreads},
          {"threads", c.threads},
          {"target", c.target},
          {"opt_level", c.optLevel},
          {"kiln_version", c.kilnVersion},
          {"torch_version", c.torchVersion},
          {"llvm_version", c.llvmVersion},
          {"blas", c.blas},
          {"tuning_records", c.tuningRecords},
          {"date", c.date},
          {"hostname", c.hostname},
          {"compile_seconds", c.compileSeconds},
          {"ceilings_id", c.ceilingsId}};
}

profiler::RunContext runContextFromJson(const json& j) {
  profiler::RunContext c;
  c.cpu = j.at("cpu").get<std::string>();
  c.physicalCores = j.at("physical_cores").get<int>();
  c.hardwareThreads = j.at("hardware_threads").get<int>();
  c.threads = j.at("threads").get<int>();
  c.target = j.at("target").get<std::string>();
  c.optLevel = j.at("opt_level").get<int>();
  c.kilnVersion = j.at("kiln_version").get<std::string>();
  c.torchVersion = j.at("torch_version").get<std::string>();
  c.llvmVersion = j.at("llvm_version").get<std::string>();
  c.blas = j.at("blas").get<std::string>();
  c.tuningRecords = j.at("tuning_records").get<std::string>();
  c.date = j.at("date").get<std::string>();
  c.hostname = j.at("hostname").get<std::string>();
  c.compileSeconds = j.at("compile_seconds").get<double>();
  if (j.contains("ceilings_id")) c.ceilingsId = j["ceilings_id"].get<int64_t>();
  return c;
}

json toJson(const profiler::BuildRecord& b) {
  return {{"target", b.target},
          {"opt_level", b.optLevel},
          {"threads", b.threads},
          {"batch", b.batch},
          {"tuning_records", b.tuningRecords},
          {"compile_seconds", b.compileSeconds},
          {"num_kernels", b.numKernels},
          {"num_calls", b.numCalls},
          {"plan_bytes", b.planBytes}};
}

profiler::BuildRecord buildRecordFromJson(const json& j) {
  profiler::BuildRecord b;
  b.target = j.at("target").get<std::string>();
  b.optLevel = j.at("opt_level").get<int>();
  b.threads = j.at("threads").get<int>();
  b.batch = j.at("batch").get<int64_t>();
  b.tuningRecords = j.at("tuning_records").get<std::string>();
  b.compileSeconds = j.at("compile_seconds").get<double>();
  b.numKernels = j.at("num_kernels").get<int>();
  b.numCalls = j.at("num_calls").get<int>();
  b.planBytes = j.at("plan_bytes").get<int64_t>();
  return b;
}

json toJson(const profiler::Timing& t) {
  return {{"samples_ms", t.samplesMs}, {"number", t.number},     {"warmup", t.warmup},
          {"min_ms", t.minMs},         {"median_ms", t.medianMs}, {"mean_ms", t.meanMs},
          {"max_ms", t.maxMs},         {"stddev_ms", t.stddevMs}, {"noisy_cv", t.noisyCv},
          {"budget_exceeded", t.budgetExceeded}, {"elapsed_ms", t.elapsedMs}};
}

profiler::Timing timingFromJson(const json& j) {
  profiler::Timing t;
  t.samplesMs = j.at("samples_ms").get<std::vector<double>>();
  t.number = j.at("number").get<int>();
  t.warmup = j.at("warmup").get<int>();
  t.minMs = j.at("min_ms").get<double>();
  t.medianMs = j.at("median_ms").get<double>();
  t.meanMs = j.at("mean_ms").get<double>();
  t.maxMs = j.at("max_ms").get<double>();
  t.stddevMs = j.at("stddev_ms").get<double>();
  t.noisyCv = j.at("noisy_cv").get<double>();
  t.budgetExceeded = j.at("budget_exceeded").get<bool>();
  t.elapsedMs = j.at("elapsed_ms").get<double>();
  return t;
}

json toJson(const profiler::ProfileRecord& p) {
  json ops = json::array();
  for (const profiler::OpRecord& o : p.ops)
    ops.push_back({{"index", o.index},
                   {"name", o.name},
                   {"key", o.key},
                   {"kernel", o.kernel},
                   {"ops", o.ops},
                   {"time_us", o.timeUs},
                   {"mean_us", o.meanUs},
                   {"min_us", o.minUs},
                   {"percent", o.percent},
                   {"calls", o.calls},
                   {"output_shape", o.outputShape},
                   {"input_shapes", o.inputShapes},
                   {"flops", o.flops},
                   {"bytes", o.bytes},
                   {"start_us", o.startUs},
                   {"duration_us", o.durationUs},
                   {"parent", o.parent}});
  return {{"batch", p.batch},   {"repeat", p.repeat},      {"ops", std::move(ops)},
          {"end_to_end", toJson(p.endToEnd)}, {"sum_ms", p.sumMs}, {"sum_mean_ms", p.sumMeanMs}};
}

profiler::ProfileRecord profileRecordFromJson(const json& j) {
  profiler::ProfileRecord p;
  p.batch = j.at("batch").get<int64_t>();
  p.repeat = j.at("repeat").get<int>();
  for (const json& o : j.at("ops")) {
    profiler::OpRecord r;
    r.index = o.at("index").get<int>();
    r.name = o.at("name").get<std::string>();
    r.key = o.at("key").get<std::string>();
    r.kernel = o.at("kernel").get<std::string>();
    r.ops = o.at("ops").get<std::vector<std::string>>();
    r.timeUs = o.at("time_us").get<double>();
    r.meanUs = o.at("mean_us").get<double>();
    r.minUs = o.at("min_us").get<double>();
    r.percent = o.at("percent").get<double>();
    r.calls = o.at("calls").get<int>();
    r.outputShape = o.at("output_shape").get<std::string>();
    r.inputShapes = o.at("input_shapes").get<std::vector<std::string>>();
    r.flops = o.at("flops").get<double>();
    r.bytes = o.at("bytes").get<double>();
    r.startUs = o.at("start_us").get<double>();
    r.durationUs = o.at("duration_us").get<double>();
    r.parent = o.value("parent", -1);
    p.ops.push_back(std::move(r));
  }
  p.endToEnd = timingFromJson(j.at("end_to_end"));
  p.sumMs = j.at("sum_ms").get<double>();
  p.sumMeanMs = j.at("sum_mean_ms").get<double>();
  return p;
}

json toJson(const profiler::Measurement& m) {
  return {{"backend", m.backend},           {"batch", m.batch},          {"status", profiler::statusName(m.status)},
          {"reason", m.reason},             {"timing", toJson(m.timing)}, {"max_abs_diff", m.maxAbsDiff},
          {"facts", m.facts}};
}

profiler::Measurement measurementFromJson(const json& j) {
  profiler::Measurement m;
  m.backend = j.at("backend").get<std::string>();
  m.batch = j.at("batch").get<int64_t>();
  m.status = profiler::parseStatus(j.at("status").get<std::string>());
  m.reason = j.at("reason").get<std::string>();
  m.timing = timingFromJson(j.at("timing"));
  m.maxAbsDiff = j.at("max_abs_diff").get<double>();
  m.facts = j.value("facts", std::string());
  return m;
}

}  // namespace kiln::app
