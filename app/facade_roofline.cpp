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

}  // namespace kiln::app
