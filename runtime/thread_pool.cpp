#include "runtime/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::runtime {
namespace {

thread_local bool t_insideTask = false;

class Pool {
 public:
  explicit Pool(int threads) : m_threads(threads) {
    for (int i = 1; i < threads; ++i) m_workers.emplace_back([this, i] { workerLoop(i); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      m_stop = true;
      ++m_generation;
    }
    m_wake.notify_all();
    for (auto& w : m_workers) w.join();
  }
  int threads() const { return m_threads; }

  int32_t launch(KilnParallelTask task, void* closure, int64_t extent) {
    int chunks = static_cast<int>(std::min<int64_t>(m_threads, extent));
    if (chunks <= 1 || t_insideTask) return task(0, extent, closure);
    std::lock_guard<std::mutex> launchLock(m_launchMutex);  // one launch at a time
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      m_task = task;
      m_closure = closure;
      m_extent = extent;
      m_chunks = chunks;
      m_result = 0;
      m_pending = chunks - 1;
      ++m_generation;
    }
    m_wake.notify_all();
    int32_t mine = runChunk(0);
    std::unique_lock<std::mutex> lock(m_mutex);
    m_done.wait(lock, [this] { return m_pending == 0; });
    return mine != 0 ? mine : m_result;
  }

 private:
  int32_t runChunk(int index) {
    int64_t begin = m_extent * index / m_chunks;
    int64_t end = m_extent * (index + 1) / m_chunks;
    t_insideTask = true;
    int32_t r = begin < end ? m_task(begin, end, m_closure) : 0;
    t_insideTask = false;
    return r;
  }

  void workerLoop(int index) {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(m_mutex);
        m_wake.wait(lock, [&] { return m_generation != seen; });
        seen = m_generation;
        if (m_stop) return;
        if (index >= m_chunks) continue;
      }
      int32_t r = runChunk(index);
      std::lock_guard<std::mutex> lock(m_mutex);
      if (r != 0 && m_result == 0) m_result = r;
      if (--m_pending == 0) m_done.notify_one();
    }
  }

  int m_threads;
  std::vector<std::thread> m_workers;
  std::mutex m_launchMutex;
  std::mutex m_mutex;
  std::condition_variable m_wake;
  std::condition_variable m_done;
  uint64_t m_generation = 0;
  bool m_stop = false;
  KilnParallelTask m_task = nullptr;
  void* m_closure = nullptr;
  int64_t m_extent = 0;
  int m_chunks = 0;
  int m_pending = 0;
  int32_t m_result = 0;
};

int defaultThreads() {
  if (const char* env = std::getenv("KILN_NUM_THREADS")) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

std::mutex g_poolMutex;
std::unique_ptr<Pool>& poolSlot() {
  static auto* slot = new std::unique_ptr<Pool>();  // intentionally leaked: no exit-time joins
  return *slot;
}

Pool& pool() {
  std::lock_guard<std::mutex> lock(g_poolMutex);
  auto& slot = poolSlot();
  if (!slot) slot = std::make_unique<Pool>(defaultThreads());
  return *slot;
}

}  // namespace

void setNumThreads(int threads) {
  std::lock_guard<std::mutex> lock(g_poolMutex);
  poolSlot() = std::make_unique<Pool>(threads > 0 ? threads : defaultThreads());
}

int numThreads() { return pool().threads(); }

int32_t parallelLaunch(KilnParallelTask task, void* closure, int64_t extent) {
  if (extent <= 0) return 0;
  return pool().launch(task, closure, extent);
}

}  // namespace kiln::runtime

extern "C" int32_t kiln_parallel_launch(KilnParallelTask task, void* closure, int64_t extent) {
  return kiln::runtime::parallelLaunch(task, closure, extent);
}
