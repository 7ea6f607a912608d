// Stress tests of the runtime thread pool's lock-free launch path: many back-to-back launches
// (workers still spinning), launches after the workers fell asleep, nested launches, launches
// from two application threads at once, and error propagation under contention.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/thread_pool.h"

namespace kiln::runtime {
namespace {

struct Hits {
  std::vector<std::atomic<int>> counts;
  explicit Hits(int64_t n) : counts(static_cast<size_t>(n)) {}
};

int32_t countTask(int64_t begin, int64_t end, void* closure) {
  auto* h = static_cast<Hits*>(closure);
  for (int64_t i = begin; i < end; ++i) h->counts[static_cast<size_t>(i)]++;
  return 0;
}

bool allOnce(const Hits& h) {
  for (const auto& c : h.counts)
    if (c.load() != 1) return false;
  return true;
}

TEST(ThreadPoolStress, BackToBackLaunchesCoverEveryIteration) {
  setNumThreads(3);
  for (int round = 0; round < 2000; ++round) {
    int64_t extent = 1 + (round * 37) % 211;
    Hits h(extent);
    ASSERT_EQ(0, parallelLaunch(countTask, &h, extent));
    ASSERT_TRUE(allOnce(h)) << "round " << round << " extent " << extent;
  }
  setNumThreads(0);
}

TEST(ThreadPoolStress, LaunchAfterWorkersSlept) {
  setNumThreads(2);
  for (int round = 0; round < 3; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // longer than the spin window
    Hits h(100);
    ASSERT_EQ(0, parallelLaunch(countTask, &h, 100));
    ASSERT_TRUE(allOnce(h));
  }
  setNumThreads(0);
}

TEST(ThreadPoolStress, NestedLaunchRunsSerially) {
  setNumThreads(2);
  struct Outer {
    Hits inner{64};
    std::atomic<int> launched{0};
  } outer;
  auto task = [](int64_t begin, int64_t end, void* closure) -> int32_t {
    auto* o = static_cast<Outer*>(closure);
    for (int64_t i = begin; i < end; ++i) {
      // Each outer iteration covers its own 8 inner iterations through a nested launch.
      struct Slice {
        Hits* h;
        int64_t base;
      } slice{&o->inner, i * 8};
      auto inner = [](int64_t b, int64_t e, void* c) -> int32_t {
        auto* s = static_cast<Slice*>(c);
        for (int64_t k = b; k < e; ++k) s->h->counts[static_cast<size_t>(s->base + k)]++;
        return 0;
      };
      parallelLaunch(inner, &slice, 8);
      o->launched++;
    }
    return 0;
  };
  EXPECT_EQ(0, parallelLaunch(task, &outer, 8));
  EXPECT_EQ(outer.launched.load(), 8);
  EXPECT_TRUE(allOnce(outer.inner));
  setNumThreads(0);
}

TEST(ThreadPoolStress, ConcurrentLaunchesFromTwoThreads) {
  setNumThreads(2);
  std::atomic<bool> ok{true};
  auto client = [&ok](int seed) {
    for (int round = 0; round < 500; ++round) {
      int64_t extent = 1 + (round * 13 + seed) % 97;
      Hits h(extent);
      if (parallelLaunch(countTask, &h, extent) != 0 || !allOnce(h)) ok = false;
    }
  };
  std::thread a(client, 1), b(client, 2);
  a.join();
  b.join();
  EXPECT_TRUE(ok.load());
  setNumThreads(0);
}

// Thread i of T starts with its own share of the range, [i/T, (i+1)/T), and then takes what is
// left of the others' shares from their backs. The caller is held in chunk 0 until every other
// chunk ran, so the worker's order is fixed: its share front to back, then the caller's from the
// back (first-come claiming would hand it chunk 1 first).
TEST(ThreadPoolStress, EachThreadStartsWithItsShareThenTakesTheRest) {
  setNumThreads(2);
  struct State {
    std::thread::id caller = std::this_thread::get_id();
    std::atomic<int> others{0};
    std::mutex mutex;
    std::vector<int64_t> workerOrder;
    bool callerTimedOut = false;
  } state;
  auto task = [](int64_t begin, int64_t end, void* closure) -> int32_t {
    auto* st = static_cast<State*>(closure);
    if (end - begin != 1) return 1;
    if (begin == 0) {
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (st->others.load() < 7)
        if (std::chrono::steady_clock::now() > deadline) {
          st->callerTimedOut = true;
          break;
        }
      return 0;
    }
    if (std::this_thread::get_id() != st->caller) {
      std::lock_guard<std::mutex> lock(st->mutex);
      st->workerOrder.push_back(begin);
    }
    st->others++;
    return 0;
  };
  ASSERT_EQ(0, parallelLaunch(task, &state, 8, 4));  // 8 chunks of one iteration each
  EXPECT_FALSE(state.callerTimedOut);
  EXPECT_EQ(state.workerOrder, (std::vector<int64_t>{4, 5, 6, 7, 3, 2, 1}));
  setNumThreads(0);
}

TEST(ThreadPoolStress, FirstErrorWins) {
  setNumThreads(3);
  for (int round = 0; round < 200; ++round) {
    auto task = [](int64_t begin, int64_t, void*) -> int32_t { return begin == 0 ? 0 : 5; };
    ASSERT_EQ(5, parallelLaunch(task, nullptr, 50));
  }
  setNumThreads(0);
}

}  // namespace
}  // namespace kiln::runtime
