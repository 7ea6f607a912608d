// kiln roofline [--threads N] [--measure] [--json FILE] [--db FILE] [--no-store]
// The machine's roofline ceilings for a thread count (profiler/ceilings.h): the stored ones while
// valid, else measured and stored; --measure measures again (kiln profile --roofline uses them).
#include <cstdio>
#include <fstream>

#include "app/cli/commands.h"

namespace kiln::cli {
namespace {

struct RooflineArgs {
  int threads = 0;
  bool measure = false;
  std::string json;
  StoreFlags store;
};

std::string mib(int64_t bytes) {
  char buf[32];
  if (bytes >= (int64_t{1} << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  else
    std::snprintf(buf, sizeof buf, "%.0f KiB", static_cast<double>(bytes) / 1024);
  return buf;
}

int rooflineCommand(const RooflineArgs& a) {
  app::CeilingsOptions options;
  options.threads = a.threads;
  options.remeasure = a.measure;
  options.store = storeOptions(a.store);
  auto result = app::machineCeilings(options);
  if (!result) return fail(result.error());
  const app::CeilingsResult& r = result.value();
  const profiler::MachineCeilings& c = r.ceilings;
  std::printf("%s, %d thread%s: %s\n", c.cpu.c_str(), c.threads, c.threads == 1 ? "" : "s",
              r.reused ? "ceilings from the store (--measure measures again)" : "ceilings measured now");
  std::printf("  FMA peak      %10.1f GFLOP/s  (f32 x%d)\n", c.peakGflops, c.vectorBits / 32);
  for (const auto& b : c.bandwidth) {
    double ridge = b.gbPerSecond > 0 ? c.peakGflops / b.gbPerSecond : 0;
    std::string capacity = b.capacityBytes > 0 ? "holds " + mib(b.capacityBytes) : "beyond the caches";
    std::printf("  %-5s %16.1f GB/s     ridge at %6.2f FLOPs/byte  (%s, triad on %s)\n", b.level.c_str(),
                b.gbPerSecond, ridge, capacity.c_str(), mib(b.workingSetBytes).c_str());
  }
  std::printf("  measured %s: %s\n", c.measuredAt.c_str(), c.method.c_str());
  if (!r.dbPath.empty())
    std::printf("stored: ceilings %lld in %s\n", static_cast<long long>(c.id), r.dbPath.c_str());
  if (!a.json.empty()) {
    std::ofstream out(a.json);
    if (!out || !(out << app::ceilingsJson(c, r.reused) << "\n")) return fail(a.json + ": cannot write file", ErrorKind::Io);
  }
  return 0;
}

}  // namespace

void registerRoofline(CLI::App& cli, Action& action) {
  auto args = std::make_shared<RooflineArgs>();
  CLI::App* cmd = cli.add_subcommand(
      "roofline", "the machine's roofline ceilings: FMA peak and L1/L2/L3/DRAM bandwidth (kept in the store)");
  cmd->add_option("--threads", args->threads, "thread count (default: KILN_NUM_THREADS or every hardware thread)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--measure", args->measure, "measure again even when the store holds them");
  cmd->add_option("--json", args->json, "write the ceilings as JSON");
  addStoreFlags(cmd, args->store, false);
  cmd->add_flag("--no-store", args->store.noStore, "measure without keeping (or reusing) the ceilings");
  cmd->callback([args, &action] { action = [args] { return rooflineCommand(*args); }; });
}

}  // namespace kiln::cli
