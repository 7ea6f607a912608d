// Tuner quality without measurement noise: replays the tuners against a table of measured costs.
//
//   kiln tune MODEL --tuner grid --trials 1000 --confirm 0 --tasks A,B,C --records table.jsonl   (whole spaces)
//   build/tests/bench/tuner_quality table.jsonl --lanes 16 --trials 32 --seeds 50
//
// For every task whose whole space is in the table, each seed runs the random tuner for N trials
// and notes its best cost, then runs the XGBoost tuner until it reaches that cost (or exhausts the
// space) and notes how many trials that took: alone, and with the history of the tasks before it
// (transfer, as `kiln tune` runs tasks in sequence). Costs come from the table, so every tuner
// sees the same, fixed machine: the comparison measures search quality only.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/lower/schedule.h"
#include "core/tune/records.h"
#include "core/tune/space.h"
#include "core/tune/tuner.h"

using namespace kiln::core;

namespace {

/// Runs `tuner` until `stop(best)` or `limit` trials; returns the trials used and the best cost.
std::pair<int, double> drive(tune::Tuner& tuner, const std::vector<double>& cost, int limit, double target) {
  int trials = 0;
  double best = 0;
  while (trials < limit && !tuner.exhausted()) {
    std::vector<int64_t> batch = tuner.propose(std::min(8, limit - trials));
    if (batch.empty()) break;
    std::vector<double> costs;
    for (int64_t i : batch) {
      costs.push_back(cost[static_cast<size_t>(i)]);
      ++trials;
      if (cost[static_cast<size_t>(i)] > 0 && (best == 0 || cost[static_cast<size_t>(i)] < best)) best = cost[static_cast<size_t>(i)];
      if (target > 0 && best > 0 && best <= target) {
        tuner.update(batch, costs);
        return {trials, best};
      }
    }
    tuner.update(batch, costs);
  }
  return {trials, best};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: tuner_quality RECORDS.jsonl [--lanes 16] [--trials 32] [--seeds 50]\n");
    return 2;
  }
  int lanes = 16, trials = 32, seeds = 50;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    int value = std::atoi(argv[i + 1]);
    if (flag == "--lanes") lanes = value;
    else if (flag == "--trials") trials = value;
    else if (flag == "--seeds") seeds = value;
  }
  lower::LowerOptions options;
  options.vectorLanes = lanes;
  options.vectorRegisters = lanes >= 16 ? 32 : 16;
  tune::RecordFile file = tune::readRecords(argv[1]);
  std::map<std::string, std::vector<const tune::TuneRecord*>> byKey;
  for (const auto& r : file.records) byKey[r.key].push_back(&r);

  // The tasks whose whole space was measured, as cost tables.
  struct Table {
    std::string key;
    tune::ConfigSpace space;
    std::vector<double> cost;
  };
  std::vector<Table> tables;
  for (const auto& [key, records] : byKey) {
    Table t{key, tune::ConfigSpace::forKey(key, options), {}};
    t.cost.assign(static_cast<size_t>(t.space.size()), 0.0);
    int covered = 0;
    for (const auto* r : records) {
      auto index = t.space.indexOf(r->knobs);
      if (!index || t.cost[static_cast<size_t>(*index)] != 0) continue;
      t.cost[static_cast<size_t>(*index)] = r->ok() ? r->costMs : -1.0;
      ++covered;
    }
    if (covered < t.space.size() || t.space.size() <= trials) {
      std::printf("skipped %s: %d of %lld configurations measured (need all, and more than %d)\n", key.c_str(), covered,
                  static_cast<long long>(t.space.size()), trials);
      continue;
    }
    tables.push_back(std::move(t));
  }

  // Per seed, the tasks in order: random with N trials; XGBoost alone; XGBoost with the history
  // of the earlier tasks' XGBoost runs (as kiln tune runs them).
  std::vector<std::vector<int>> alone(tables.size()), transfer(tables.size());
  for (int seed = 1; seed <= seeds; ++seed) {
    auto history = std::make_shared<tune::TuningHistory>();
    for (size_t t = 0; t < tables.size(); ++t) {
      const Table& table = tables[t];
      auto random = tune::makeTuner("random", table.space, static_cast<uint64_t>(seed));
      double randomBest = drive(*random, table.cost, trials, 0).second;
      auto xgb = tune::makeTuner("xgb", table.space, static_cast<uint64_t>(seed) + 1000);
      alone[t].push_back(drive(*xgb, table.cost, static_cast<int>(table.space.size()), randomBest).first);
      auto guided = tune::makeTuner("xgb", table.space, static_cast<uint64_t>(seed) + 2000, history);
      transfer[t].push_back(drive(*guided, table.cost, static_cast<int>(table.space.size()), randomBest).first);
      guided->finish();
    }
  }
  auto median = [](std::vector<int> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  auto share = [&](const std::vector<int>& v) {
    return 100.0 * static_cast<double>(std::count_if(v.begin(), v.end(), [&](int n) { return n <= trials / 2; })) /
           static_cast<double>(v.size());
  };
  std::printf("trials for XGBoost to reach the random tuner's best after N = %d trials (%d seeds; medians)\n", trials,
              seeds);
  std::printf("%-4s %-66s %6s %12s %14s %16s\n", "#", "task", "space", "xgb alone", "xgb transfer", "transfer <= N/2");
  for (size_t t = 0; t < tables.size(); ++t)
    std::printf("%-4zu %-66.66s %6lld %12d %14d %15.0f%%\n", t + 1, tables[t].key.c_str(),
                static_cast<long long>(tables[t].space.size()), median(alone[t]), median(transfer[t]),
                share(transfer[t]));
  return 0;
}
