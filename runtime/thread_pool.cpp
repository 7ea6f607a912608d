// The runtime thread pool: low-overhead launches for the parallel loops of generated kernels.
//
// A model runs dozens of short kernels per inference (MobileNetV2: ~60), so a launch must cost
// microseconds, not a round of futex wake-ups:
// - A launch publishes the task and bumps an atomic generation counter; workers that finished
//   the previous launch recently are still spinning on that counter (with pause instructions) and
//   start at once. Only workers that spun for kSpinMicros without work sleep on a condition
//   variable, and only then does a launch take the mutex to wake them.
// - The range is cut into a few chunks per thread that participants claim with a CAS on one
//   64-bit word holding (generation, chunk count, next chunk): a worker late from an older launch cannot claim
//   a chunk of a newer one, and a thread that the OS deschedules (the machine may be shared) does
//   not hold up the others — they take its chunks.
// - The caller takes part and then spins until every claimed chunk is done.
// No mutex is taken on the hot path. A launch from inside a task, or while another thread's
// launch is running, runs serially in the calling thread.
#include "runtime/thread_pool.h"

#include <signal.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace kiln::runtime {
namespace {

thread_local bool t_insideTask = false;

/// The alternate signal stack this thread installed (ensureSignalStack), unmapped at thread exit.
struct SignalStack {
  void* base = nullptr;
  size_t size = 0;
  ~SignalStack() {
    if (!base) return;
    stack_t current;
    // Leave a stack someone else installed since alone; disable ours before unmapping it.
    if (sigaltstack(nullptr, &current) == 0 && current.ss_sp == base) {
      stack_t off{};
      off.ss_flags = SS_DISABLE;
      sigaltstack(&off, nullptr);
    }
    munmap(base, size);
  }
};
thread_local SignalStack t_signalStack;

/// How long an idle worker polls for the next launch before sleeping.
constexpr auto kSpinTime = std::chrono::microseconds(300);

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

class Pool {
 public:
  explicit Pool(int threads) : m_threads(threads) {
    for (int i = 1; i < threads; ++i) m_workers.emplace_back([this] { workerLoop(); });
  }
  ~Pool() {
    m_stop.store(true);
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      m_generation.fetch_add(1);
    }
    m_wake.notify_all();
    for (auto& w : m_workers) w.join();
  }
  int threads() const { return m_threads; }

  int32_t launch(KilnParallelTask task, void* closure, int64_t extent, int64_t chunksPerThread) {
    if (m_threads <= 1 || extent <= 1 || t_insideTask || m_busy.exchange(true, std::memory_order_acquire))
      return runSerial(task, closure, extent);
    int64_t chunks = std::min<int64_t>({extent, int64_t{m_threads} * chunksPerThread, 0xffff});
    m_task.store(task, std::memory_order_relaxed);
    m_closure.store(closure, std::memory_order_relaxed);
    m_extent.store(extent, std::memory_order_relaxed);
    m_result.store(0, std::memory_order_relaxed);
    m_finished.store(0, std::memory_order_relaxed);
    uint64_t gen = (++m_launchCount) & 0xffffffffu;
    if (gen == 0) gen = ++m_launchCount & 0xffffffffu;  // 0 is "no launch yet"
    m_claim.store(gen << 32 | static_cast<uint64_t>(chunks) << 16, std::memory_order_release);
    m_generation.store(gen);  // seq_cst: ordered before the sleeper check below
    if (m_sleepers.load() > 0) {
      { std::lock_guard<std::mutex> lock(m_mutex); }
      m_wake.notify_all();
    }
    work(gen);
    for (int spins = 0; m_finished.load(std::memory_order_acquire) < chunks; ++spins) {
      if (spins < (1 << 16)) cpuRelax();
      else std::this_thread::yield();
    }
    int32_t result = m_result.load(std::memory_order_relaxed);
    m_busy.store(false, std::memory_order_release);
    return result;
  }

 private:
  static int32_t runSerial(KilnParallelTask task, void* closure, int64_t extent) {
    bool outer = !t_insideTask;
    t_insideTask = true;
    int32_t r = task(0, extent, closure);
    if (outer) t_insideTask = false;
    return r;
  }

  /// Claims and runs chunks of launch `gen` until none is left. The claim word holds
  /// (generation << 32) | (chunks << 16) | next chunk.
  void work(uint64_t gen) {
    for (;;) {
      uint64_t claim = m_claim.load(std::memory_order_acquire);
      int64_t index = 0, chunks = 0;
      do {
        if ((claim >> 32) != gen) return;
        chunks = static_cast<int64_t>((claim >> 16) & 0xffffu);
        index = static_cast<int64_t>(claim & 0xffffu);
        if (index >= chunks) return;
      } while (!m_claim.compare_exchange_weak(claim, claim + 1, std::memory_order_acq_rel));
      // The successful claim synchronizes with the launch that published these.
      int64_t extent = m_extent.load(std::memory_order_relaxed);
      KilnParallelTask task = m_task.load(std::memory_order_relaxed);
      void* closure = m_closure.load(std::memory_order_relaxed);
      int64_t begin = extent * index / chunks, end = extent * (index + 1) / chunks;
      t_insideTask = true;
      int32_t r = begin < end ? task(begin, end, closure) : 0;
      t_insideTask = false;
      if (r != 0) {
        int32_t expected = 0;
        m_result.compare_exchange_strong(expected, r);
      }
      m_finished.fetch_add(1, std::memory_order_acq_rel);
    }
  }

  void workerLoop() {
    ensureSignalStack();
    uint64_t seen = 0;
    for (;;) {
      uint64_t gen = waitForLaunch(seen);
      if (m_stop.load()) return;
      seen = gen;
      work(gen);
    }
  }

  /// Spins, then sleeps, until the generation differs from `seen`.
  uint64_t waitForLaunch(uint64_t seen) {
    auto deadline = std::chrono::steady_clock::now() + kSpinTime;
    for (int i = 0;; ++i) {
      uint64_t gen = m_generation.load(std::memory_order_acquire);
      if (gen != seen) return gen;
      cpuRelax();
      if ((i & 255) == 255 && std::chrono::steady_clock::now() > deadline) break;
    }
    std::unique_lock<std::mutex> lock(m_mutex);
    m_sleepers.fetch_add(1);  // seq_cst: before re-reading the generation
    m_wake.wait(lock, [&] { return m_generation.load() != seen; });
    m_sleepers.fetch_sub(1);
    return m_generation.load();
  }

  const int m_threads;
  std::vector<std::thread> m_workers;
  std::atomic<bool> m_busy{false};
  std::atomic<bool> m_stop{false};
  std::atomic<uint64_t> m_generation{0};
  std::atomic<uint64_t> m_claim{0};  // (generation << 32) | next chunk
  std::atomic<int64_t> m_finished{0};
  std::atomic<int32_t> m_result{0};
  std::atomic<int> m_sleepers{0};
  uint64_t m_launchCount = 0;
  // Published by launch() before the claim word; read by a worker after a successful claim.
  std::atomic<KilnParallelTask> m_task{nullptr};
  std::atomic<void*> m_closure{nullptr};
  std::atomic<int64_t> m_extent{0};
  std::mutex m_mutex;
  std::condition_variable m_wake;
};

int defaultThreads() {
  if (const char* env = std::getenv("KILN_NUM_THREADS")) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

std::mutex g_poolMutex;        // guards creation and replacement only
std::atomic<Pool*> g_pool{nullptr};

Pool& pool() {
  if (Pool* p = g_pool.load(std::memory_order_acquire)) return *p;
  std::lock_guard<std::mutex> lock(g_poolMutex);
  if (Pool* p = g_pool.load(std::memory_order_acquire)) return *p;
  auto* p = new Pool(defaultThreads());  // intentionally leaked at exit: no exit-time joins
  g_pool.store(p, std::memory_order_release);
  return *p;
}

}  // namespace

void setNumThreads(int threads) {
  std::lock_guard<std::mutex> lock(g_poolMutex);
  int n = threads > 0 ? threads : defaultThreads();
  Pool* old = g_pool.load(std::memory_order_acquire);
  if (old && old->threads() == n) return;
  g_pool.store(new Pool(n), std::memory_order_release);
  delete old;  // no launch may run concurrently with setNumThreads (as documented)
}

int numThreads() { return pool().threads(); }

void ensureSignalStack() {
  stack_t current;
  if (sigaltstack(nullptr, &current) != 0 || !(current.ss_flags & SS_DISABLE)) return;  // has one
  // Room for a handler that formats one line (and for a sanitizer's instrumented frames).
  constexpr size_t kSize = 64 * 1024;
  void* base = mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) return;  // no alternate stack: a stack overflow then dies unnamed
  stack_t ss{};
  ss.ss_sp = base;
  ss.ss_size = kSize;
  if (sigaltstack(&ss, nullptr) != 0) {
    munmap(base, kSize);
    return;
  }
  t_signalStack.base = base;
  t_signalStack.size = kSize;
}

int32_t parallelLaunch(KilnParallelTask task, void* closure, int64_t extent, int64_t chunksPerThread) {
  if (extent <= 0) return 0;
  return pool().launch(task, closure, extent, std::clamp<int64_t>(chunksPerThread, 1, 64));
}

}  // namespace kiln::runtime

extern "C" int32_t kiln_parallel_launch(KilnParallelTask task, void* closure, int64_t extent) {
  return kiln::runtime::parallelLaunch(task, closure, extent);
}

extern "C" int32_t kiln_parallel_launch_chunked(KilnParallelTask task, void* closure, int64_t extent,
                                                int64_t chunks_per_thread) {
  return kiln::runtime::parallelLaunch(task, closure, extent, chunks_per_thread);
}
