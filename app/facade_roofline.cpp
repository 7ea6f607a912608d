// The machine's roofline ceilings through the façade (kiln roofline, kiln profile --roofline, the
// Workbench's Roofline view): looked up in the session store, measured when missing.
#include <nlohmann/json.hpp>

#include "app/facade.h"
#include "app/facade_internal.h"
#include "app/measure_internal.h"
#include "runtime/thread_pool.h"

namespace kiln::app {

Result<CeilingsResult> machineCeilings(const CeilingsOptions& options) {
  if (options.threads < 0) return Diagnostic{"--threads must not be negative", ErrorKind::Usage};
  return guarded<CeilingsResult>("", [&] {
    std::unique_ptr<profiler::Store> store = openStoreFor(options.store);
    int threads = options.threads > 0 ? options.threads : runtime::numThreads();
    profiler::CeilingsLookup found = profiler::ceilingsFor(store.get(), threads, options.remeasure);
    CeilingsResult r;
    r.ceilings = std::move(found.ceilings);
    r.reused = found.reused;
    if (store) r.dbPath = store->path();
    return r;
  });
}

std::string ceilingsJson(const profiler::MachineCeilings& c, bool reused) {
  nlohmann::json bandwidth = nlohmann::json::array();
  for (const auto& b : c.bandwidth)
    bandwidth.push_back({{"level", b.level},
                         {"capacity_bytes", b.capacityBytes},
                         {"working_set_bytes", b.workingSetBytes},
                         {"gb_per_second", b.gbPerSecond}});
  nlohmann::json j = {{"id", c.id},
                      {"machine_key", c.machineKey},
                      {"cpu", c.cpu},
                      {"threads", c.threads},
                      {"vector_bits", c.vectorBits},
                      {"peak_gflops", c.peakGflops},
                      {"bandwidth", bandwidth},
                      {"method", c.method},
                      {"measured_at", c.measuredAt},
                      {"reused", reused}};
  return j.dump(2);
}

profiler::MachineCeilings ceilingsFromJson(const nlohmann::json& j) {
  profiler::MachineCeilings c;
  c.id = j.value("id", int64_t{0});
  c.machineKey = j.at("machine_key").get<std::string>();
  c.cpu = j.at("cpu").get<std::string>();
  c.threads = j.at("threads").get<int>();
  c.vectorBits = j.at("vector_bits").get<int>();
  c.peakGflops = j.at("peak_gflops").get<double>();
  for (const auto& b : j.at("bandwidth"))
    c.bandwidth.push_back(profiler::BandwidthCeiling{b.at("level").get<std::string>(), b.at("capacity_bytes").get<int64_t>(),
                                                     b.at("working_set_bytes").get<int64_t>(),
                                                     b.at("gb_per_second").get<double>()});
  c.method = j.at("method").get<std::string>();
  c.measuredAt = j.at("measured_at").get<std::string>();
  return c;
}

nlohmann::json serveCeilingsRequest(const nlohmann::json& q) {
  workerMeasuring();
  return nlohmann::json::parse(ceilingsJson(profiler::measureCeilings(q.at("threads").get<int>()), false));
}

profiler::MachineCeilings measureCeilingsIsolated(int threads, const IsolationOptions& isolate) {
  auto reply = callMeasureWorker({{"op", "ceilings"}, {"threads", threads}}, isolate);
  if (!reply) throw Error("measuring the machine's ceilings: " + reply.error().message, reply.error().kind);
  return ceilingsFromJson(reply.value());
}

}  // namespace kiln::app
