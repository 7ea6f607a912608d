// kiln sessions list | show ID | diff BUILD_A BUILD_B [--roofline] [--svg FILE]   [--db FILE]
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>

#include "app/cli/commands.h"
#include "profiler/op_profile.h"

namespace kiln::cli {
namespace {

struct SessionsArgs {
  int64_t session = 0, buildA = 0, buildB = 0;
  bool roofline = false;
  std::string svg;
  StoreFlags store;
};

std::string clip(const std::string& s, size_t width) {
  return s.size() <= width ? s : s.substr(0, width - 3) + "...";
}

int listCommand(const SessionsArgs& a) {
  auto sessions = app::listSessions(a.store.db);
  if (!sessions) return fail(sessions.error());
  if (sessions.value().empty()) {
    std::printf("no sessions in %s\n", app::resolveDbPath(a.store.db).c_str());
    return 0;
  }
  std::printf("%5s  %-20s %-12s %-20s %-20s %5s %6s %8s %6s\n", "id", "model", "sha256", "created", "updated",
              "runs", "builds", "profiles", "sweeps");
  for (const auto& s : sessions.value())
    std::printf("%5lld  %-20s %-12s %-20s %-20s %5d %6d %8d %6d\n", static_cast<long long>(s.id),
                clip(s.model.name, 20).c_str(), s.model.sha256.substr(0, 12).c_str(), s.createdAt.c_str(),
                s.updatedAt.c_str(), s.runs, s.builds, s.profiles, s.sweeps);
  return 0;
}

int showCommand(const SessionsArgs& a) {
  auto loaded = app::loadSession(a.store.db, a.session);
  if (!loaded) return fail(loaded.error());
  const auto& d = loaded.value();
  const auto& s = d.summary;
  std::printf("session %lld: %s (%s)\n  sha256 %s\n  created %s, updated %s\n\n",
              static_cast<long long>(s.id), s.model.name.c_str(), s.model.path.c_str(),
              s.model.sha256.c_str(), s.createdAt.c_str(), s.updatedAt.c_str());
  std::printf("runs\n%5s  %-8s %-20s %-28s %3s %7s  %s\n", "id", "kind", "date", "target", "-O", "threads",
              "cpu");
  for (const auto& r : d.runs)
    std::printf("%5lld  %-8s %-20s %-28s %3d %7d  %s\n", static_cast<long long>(r.id), r.kind.c_str(),
                r.createdAt.c_str(), clip(r.context.target, 28).c_str(), r.context.optLevel,
                r.context.threads, r.context.cpu.c_str());
  std::map<int64_t, const profiler::StoredProfile*> profileOf;
  for (const auto& p : d.profiles) profileOf[p.buildId] = &p;
  std::printf("\nbuilds\n%5s %5s  %-28s %3s %6s %8s %6s %10s  %s\n", "id", "run", "target", "-O", "batch",
              "kernels", "calls", "compile s", "profile (e2e mean / sum of call means / gap)");
  for (const auto& b : d.builds) {
    std::string prof = "-";
    if (auto it = profileOf.find(b.id); it != profileOf.end()) {
      char buf[96];
      const auto& p = it->second->profile;
      std::snprintf(buf, sizeof buf, "%.3f ms / %.3f ms / %+.1f %%", p.endToEnd.meanMs, p.sumMeanMs,
                    p.gapPercent());
      prof = buf;
    }
    std::printf("%5lld %5lld  %-28s %3d %6lld %8d %6d %10.2f  %s\n", static_cast<long long>(b.id),
                static_cast<long long>(b.runId), clip(b.build.target, 28).c_str(), b.build.optLevel,
                static_cast<long long>(b.build.batch), b.build.numKernels, b.build.numCalls,
                b.build.compileSeconds, prof.c_str());
  }
  std::printf("\nmeasurements\n%5s  %-18s %6s %-14s %10s %10s %7s %12s  %s\n", "run", "backend", "batch",
              "status", "median ms", "min ms", "CV %", "items/s", "reason");
  for (const auto& sm : d.measurements) {
    const auto& m = sm.measurement;
    if (m.ok())
      std::printf("%5lld  %-18s %6lld %-14s %10.3f %10.3f %7.1f %12.1f  %s\n",
                  static_cast<long long>(sm.runId), m.backend.c_str(), static_cast<long long>(m.batch), "ok",
                  m.timing.medianMs, m.timing.minMs, 100 * m.timing.cv(), m.throughput(), m.reason.c_str());
    else
      std::printf("%5lld  %-18s %6lld %-14s %10s %10s %7s %12s  %s\n", static_cast<long long>(sm.runId),
                  m.backend.c_str(), static_cast<long long>(m.batch), profiler::statusName(m.status), "-",
                  "-", "-", "-", m.reason.c_str());
  }
  return 0;
}

/// Both builds' calls on one roofline: per call (matched by its output values) where it moved,
/// and the chart with arrows as SVG. The ceilings are B's profile's, else A's, else the store's
/// for B's thread count (measured now when the store has none).
int rooflineMoves(const SessionsArgs& a, const app::BuildDiff& d) {
  std::optional<profiler::MachineCeilings> ceilings = d.ceilingsB ? d.ceilingsB : d.ceilingsA;
  std::string from = ceilings ? "the ceilings its profile's run refers to" : "";
  if (!ceilings || ceilings->bandwidth.empty()) {
    app::CeilingsOptions options;
    options.threads = d.b.threads;
    options.store = storeOptions(a.store);
    auto measured = app::machineCeilings(options);
    if (!measured) return fail(measured.error());
    ceilings = measured.value().ceilings;
    from = measured.value().reused ? "the store's ceilings for this machine" : "ceilings measured now";
  }
  const profiler::MachineCeilings& c = *ceilings;
  std::vector<profiler::RooflinePoint> pa = profiler::rooflineOf(d.profileA, c), pb = profiler::rooflineOf(d.profileB, c);
  std::printf("\nRoofline, A -> B (%s: %s, %d threads, peak %.1f GFLOP/s)\n", from.c_str(), c.cpu.c_str(), c.threads,
              c.peakGflops);
  std::printf("%-28s %-24s %19s %19s %17s  %s\n", "operator (outputs)", "ops in B", "FLOPs/byte A -> B",
              "GFLOP/s A -> B", "% of bound A -> B", "bound by (B)");
  std::map<std::string, const profiler::RooflinePoint*> before;
  for (const auto& p : pa) before.emplace(p.key, &p);
  for (const auto& p : pb) {
    if (!(p.flops > 0)) continue;
    auto it = before.find(p.key);
    char ai[40], gf[40], pct[40];
    if (it == before.end()) {
      std::snprintf(ai, sizeof ai, "- -> %.3g", p.intensity);
      std::snprintf(gf, sizeof gf, "- -> %.3g", p.gflops);
      std::snprintf(pct, sizeof pct, "- -> %.1f", p.percentOfBound);
    } else {
      const auto& q = *it->second;
      std::snprintf(ai, sizeof ai, "%.3g -> %.3g", q.intensity, p.intensity);
      std::snprintf(gf, sizeof gf, "%.3g -> %.3g", q.gflops, p.gflops);
      std::snprintf(pct, sizeof pct, "%.1f -> %.1f", q.percentOfBound, p.percentOfBound);
    }
    std::printf("%-28s %-24s %19s %19s %17s  %s\n", clip(p.key, 28).c_str(), clip(profiler::joinOps(p.ops), 24).c_str(),
                ai, gf, pct, p.memoryBound ? "memory" : "compute");
  }
  if (!a.svg.empty()) {
    std::string title = "Build " + std::to_string(d.buildA) + " (grey) -> build " + std::to_string(d.buildB);
    std::ofstream out(a.svg);
    if (!out || !(out << profiler::rooflineComparisonSvg(title, pa, pb, c)))
      return fail(a.svg + ": cannot write file", ErrorKind::Io);
    std::printf("wrote %s\n", a.svg.c_str());
  }
  return 0;
}

int diffCommand(const SessionsArgs& a) {
  auto diff = app::diffBuilds(a.store.db, a.buildA, a.buildB);
  if (!diff) return fail(diff.error());
  const auto& d = diff.value();
  auto describe = [](const char* tag, int64_t id, const profiler::BuildRecord& b, double e2e, double sum) {
    std::printf(
        "%s: build %lld  %s -O%d  batch %lld  threads %d  %d calls   end-to-end %.3f ms, sum %.3f ms\n", tag,
        static_cast<long long>(id), b.target.c_str(), b.optLevel, static_cast<long long>(b.batch), b.threads,
        b.numCalls, e2e, sum);
  };
  describe("A", d.buildA, d.a, d.endToEndMsA, d.sumMsA);
  describe("B", d.buildB, d.b, d.endToEndMsB, d.sumMsB);
  if (d.endToEndMsB > 0) std::printf("B/A end-to-end: %.3fx\n\n", d.endToEndMsB / d.endToEndMsA);
  std::printf("%-28s %-24s %-24s %10s %10s %8s  %s\n", "operator (outputs)", "ops in A", "ops in B", "A us",
              "B us", "B/A", "change");
  for (const auto& r : d.rows) {
    char ta[32] = "-", tb[32] = "-", ratio[32] = "";
    if (r.timeUsA >= 0) std::snprintf(ta, sizeof ta, "%.1f", r.timeUsA);
    if (r.timeUsB >= 0) std::snprintf(tb, sizeof tb, "%.1f", r.timeUsB);
    if (r.timeUsA > 0 && r.timeUsB >= 0) std::snprintf(ratio, sizeof ratio, "%.2f", r.timeUsB / r.timeUsA);
    std::printf("%-28s %-24s %-24s %10s %10s %8s  %s\n", clip(r.key, 28).c_str(), clip(r.opsA, 24).c_str(),
                clip(r.opsB, 24).c_str(), ta, tb, ratio, r.change.c_str());
  }
  if (a.roofline || !a.svg.empty()) return rooflineMoves(a, d);
  return 0;
}

}  // namespace

void registerSessions(CLI::App& cli, Action& action) {
  auto args = std::make_shared<SessionsArgs>();
  CLI::App* cmd = cli.add_subcommand("sessions", "list, show and diff what the session store keeps");
  cmd->require_subcommand(1);
  addStoreFlags(cmd, args->store, false);

  CLI::App* list = cmd->add_subcommand("list", "every session: model, dates, counts");
  list->callback([args, &action] { action = [args] { return listCommand(*args); }; });

  CLI::App* show = cmd->add_subcommand("show", "a session's runs, builds, measurements and profiles");
  show->add_option("session", args->session, "session id (kiln sessions list)")->required();
  show->callback([args, &action] { action = [args] { return showCommand(*args); }; });

  CLI::App* diff = cmd->add_subcommand("diff", "two profiled builds per operator: time and fusion changes");
  diff->add_option("build_a", args->buildA, "build id (kiln sessions show)")->required();
  diff->add_option("build_b", args->buildB, "build id")->required();
  diff->add_flag("--roofline", args->roofline, "also each call's move on the roofline (intensity, GFLOP/s, % of bound)");
  diff->add_option("--svg", args->svg, "write both builds on one roofline chart, arrows from A to B, as SVG");
  diff->callback([args, &action] { action = [args] { return diffCommand(*args); }; });
  for (CLI::App* sub : {list, show, diff}) addStoreFlags(sub, args->store, false);
}

}  // namespace kiln::cli
