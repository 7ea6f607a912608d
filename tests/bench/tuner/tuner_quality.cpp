// Tuner quality without measurement noise: replays the tuners against a table of measured costs.
//
//   kiln tune MODEL --tuner grid --trials 1000 --confirm 0 --tasks A,B,C --records table.jsonl   (whole spaces)
//   build/tests/bench/tuner_quality table.jsonl --lanes 16 --trials 32 --seeds 50 [--features loops]
//   build/tests/bench/tuner_quality records.jsonl --lanes 16 --rank [--seeds 20]
//
// For every task whose whole space is in the table, each seed runs the random tuner for N trials
// and notes its best cost, then runs the XGBoost tuner until it reaches that cost (or exhausts the
// space) and notes how many trials that took: alone, and with the history of the tasks before it
// (transfer, as `kiln tune` runs tasks in sequence). Costs come from the table, so every tuner
// sees the same, fixed machine: the comparison measures search quality only. --features picks
// what the XGBoost tuner's model sees (features.h; default loops).
//
// --rank needs no whole space: for every task with at least 48 (--min) measured configurations,
// each seed trains the cost model on a random half of them (alone, and with the other tasks of
// the same operator kind as transfer groups, as the tuner's history; loop features, whose rows
// mean the same for every kind, also with every other task) and ranks the other half, once per
// feature set. It reports how close the predicted best of the held-out half comes to
// the true best there (top-1 and top-5 picks, cost ratios: 1.00 is perfect) and the rank
// correlation of predictions and speed.
// --drop PREFIX (repeatable) leaves out the loop features whose names start with PREFIX.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <memory>
#include <string>
#include <vector>

#include "core/lower/schedule.h"
#include "core/tune/cost_model.h"
#include "core/tune/features.h"
#include "core/tir/loop_features.h"
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

/// Spearman rank correlation of `a` and `b`.
double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  auto ranks = [](const std::vector<double>& v) {
    std::vector<size_t> order(v.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return v[x] < v[y]; });
    std::vector<double> r(v.size());
    for (size_t i = 0; i < order.size(); ++i) r[order[i]] = static_cast<double>(i);
    return r;
  };
  std::vector<double> ra = ranks(a), rb = ranks(b);
  double n = static_cast<double>(a.size()), mean = (n - 1) / 2, num = 0, da = 0, db = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (ra[i] - mean) * (rb[i] - mean);
    da += (ra[i] - mean) * (ra[i] - mean);
    db += (rb[i] - mean) * (rb[i] - mean);
  }
  return da > 0 && db > 0 ? num / std::sqrt(da * db) : 0;
}

/// The --rank report (see the file comment).
int rankReport(const tune::RecordFile& file, const lower::LowerOptions& options, int seeds,
               const std::vector<std::string>& drop, size_t least) {
  struct Task {
    std::string key;
    std::vector<lower::Knobs> knobs;
    std::vector<double> cost;
  };
  std::map<std::string, Task> byKey;
  for (const auto& r : file.records) {
    if (!r.ok() || r.costMs <= 0 || r.tuner == tune::kConfirmTuner) continue;
    Task& t = byKey[r.key];
    t.key = r.key;
    if (std::find(t.knobs.begin(), t.knobs.end(), r.knobs) != t.knobs.end()) continue;
    t.knobs.push_back(r.knobs);
    t.cost.push_back(r.costMs);
  }
  std::vector<Task> tasks;
  for (auto& [key, t] : byKey)
    if (t.cost.size() >= least) tasks.push_back(std::move(t));
  const tune::FeatureSet sets[] = {tune::FeatureSet::Knobs, tune::FeatureSet::Loops, tune::FeatureSet::Both};
  // rows[set][task][i]
  std::vector<std::vector<std::vector<std::vector<float>>>> rows(3);
  for (int s = 0; s < 3; ++s)
    for (const Task& t : tasks) {
      tune::ConfigSpace space = tune::ConfigSpace::forKey(t.key, options);
      tune::CandidateFeatures features(space, sets[s], options, 2);
      std::vector<std::vector<float>> r;
      auto start = std::chrono::steady_clock::now();
      for (const auto& k : t.knobs) {
        auto index = space.indexOf(k);
        if (!index) {
          std::fprintf(stderr, "%s: knobs not in the space\n", t.key.c_str());
          return 1;
        }
        r.push_back(features.row(*index));
      }
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      if (s == 1)
        std::printf("features of %zu points of %s: %.1f ms each\n", r.size(), t.key.c_str(), ms / static_cast<double>(r.size()));
      // Ablation: leave out the loop features whose names start with a --drop prefix.
      if (s != 0 && !drop.empty()) {
        const auto& names = tir::loopFeatureNames();
        size_t offset = r.empty() ? 0 : r[0].size() - names.size();
        for (auto& row : r) {
          std::vector<float> kept(row.begin(), row.begin() + static_cast<std::ptrdiff_t>(offset));
          for (size_t i = 0; i < names.size(); ++i)
            if (std::none_of(drop.begin(), drop.end(), [&](const std::string& p) { return names[i].rfind(p, 0) == 0; }))
              kept.push_back(row[offset + i]);
          row = std::move(kept);
        }
      }
      rows[static_cast<size_t>(s)].push_back(std::move(r));
    }
  std::printf("\n%-7s %-9s %8s %8s %9s   (held-out half; medians over tasks of the per-task means over %d seeds)\n",
              "set", "training", "top-1", "top-5", "spearman", seeds);
  for (int s = 0; s < 3; ++s)
    for (int transfer : {0, 1, 2}) {  // alone, with the task's kind, with every task (loops only)
      if (transfer == 2 && sets[s] != tune::FeatureSet::Loops) continue;
      std::vector<double> top1s, top5s, rhos;
      for (size_t t = 0; t < tasks.size(); ++t) {
        double top1 = 0, top5 = 0, rho = 0;
        for (int seed = 1; seed <= seeds; ++seed) {
          std::mt19937_64 rng(static_cast<uint64_t>(seed));
          std::vector<size_t> order(tasks[t].cost.size());
          std::iota(order.begin(), order.end(), 0);
          std::shuffle(order.begin(), order.end(), rng);
          size_t half = order.size() / 2;
          std::vector<std::vector<float>> x;
          std::vector<float> y;
          std::vector<unsigned> groups;
          auto group = [&](size_t task, const std::vector<size_t>& points) {
            double best = 1e30;
            for (size_t i : points) best = std::min(best, tasks[task].cost[i]);
            for (size_t i : points) {
              x.push_back(rows[static_cast<size_t>(s)][task][i]);
              y.push_back(static_cast<float>(best / tasks[task].cost[i]));
            }
            groups.push_back(static_cast<unsigned>(points.size()));
          };
          if (transfer)
            for (size_t other = 0; other < tasks.size(); ++other) {
              bool sameKind = lower::parseTuneKey(tasks[other].key).kind == lower::parseTuneKey(tasks[t].key).kind;
              if (other == t || (transfer == 1 && !sameKind)) continue;
              std::vector<size_t> all(tasks[other].cost.size());
              std::iota(all.begin(), all.end(), 0);
              group(other, all);
            }
          group(t, std::vector<size_t>(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(half)));
          tune::CostModel model(static_cast<uint64_t>(seed));
          model.fit(x, y, groups);
          std::vector<std::vector<float>> test;
          std::vector<double> cost;
          for (size_t i = half; i < order.size(); ++i) {
            test.push_back(rows[static_cast<size_t>(s)][t][order[i]]);
            cost.push_back(tasks[t].cost[order[i]]);
          }
          std::vector<float> score = model.predict(test);
          std::vector<size_t> ranked(test.size());
          std::iota(ranked.begin(), ranked.end(), 0);
          std::sort(ranked.begin(), ranked.end(), [&](size_t a, size_t b) { return score[a] > score[b]; });
          double best = *std::min_element(cost.begin(), cost.end()), best5 = 1e30;
          for (size_t i = 0; i < 5 && i < ranked.size(); ++i) best5 = std::min(best5, cost[ranked[i]]);
          top1 += cost[ranked[0]] / best;
          top5 += best5 / best;
          std::vector<double> speed, predicted;
          for (size_t i = 0; i < cost.size(); ++i) speed.push_back(1 / cost[i]), predicted.push_back(score[i]);
          rho += spearman(predicted, speed);
        }
        top1s.push_back(top1 / seeds), top5s.push_back(top5 / seeds), rhos.push_back(rho / seeds);
      }
      auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v.empty() ? 0.0 : v[v.size() / 2];
      };
      std::printf("%-7s %-9s %8.3f %8.3f %9.3f\n", tune::featureSetName(sets[s]),
                  transfer == 0 ? "alone" : transfer == 1 ? "transfer" : "any kind",
                  median(top1s), median(top5s), median(rhos));
    }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: tuner_quality RECORDS.jsonl [--lanes 16] [--trials 32] [--seeds 50] [--features loops] [--rank [--min 48] [--drop FEATURE_PREFIX]...]\n");
    return 2;
  }
  int lanes = 16, trials = 32, seeds = 50;
  bool rank = false;
  std::vector<std::string> drop;
  size_t least = 48;
  tune::TunerOptions tunerOptions;
  for (int i = 2; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--rank") {
      rank = true;
      continue;
    }
    if (i + 1 >= argc) break;
    std::string value = argv[++i];
    if (flag == "--lanes") lanes = std::atoi(value.c_str());
    else if (flag == "--trials") trials = std::atoi(value.c_str());
    else if (flag == "--seeds") seeds = std::atoi(value.c_str());
    else if (flag == "--features") tunerOptions.features = tune::featureSetNamed(value);
    else if (flag == "--drop") drop.push_back(value);
    else if (flag == "--min") least = static_cast<size_t>(std::max(4, std::atoi(value.c_str())));
  }
  lower::LowerOptions options;
  options.vectorLanes = lanes;
  options.vectorRegisters = lanes >= 16 ? 32 : 16;
  tune::RecordFile file = tune::readRecords(argv[1]);
  if (rank) return rankReport(file, options, seeds, drop, least);
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
      auto xgb = tune::makeTuner("xgb", table.space, static_cast<uint64_t>(seed) + 1000, nullptr, tunerOptions);
      alone[t].push_back(drive(*xgb, table.cost, static_cast<int>(table.space.size()), randomBest).first);
      auto guided = tune::makeTuner("xgb", table.space, static_cast<uint64_t>(seed) + 2000, history, tunerOptions);
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
