// The runtime thread pool: low-overhead launches for the parallel loops of generated kernels.
//
// A model runs dozens of short kernels per inference (MobileNetV2: ~60), so a launch must cost
// microseconds, not a round of futex wake-ups, and on a machine whose two CPUs may sit on cores
// that share no cache (the host moves them; profiler/core_latency.h) every cache line that
// crosses between the threads costs ~300 ns. So:
// - A launch publishes the task and bumps one word holding (generation, chunk count); workers
//   that finished the previous launch recently are still spinning on it (with pause
//   instructions) and start at once. Only workers that spun for kSpinTime without work sleep on
//   a condition variable, and only then does a launch take the mutex to wake them.
// - The range is cut into a few chunks per thread, and participant i owns the chunks of
//   [i/T, (i+1)/T) of it: its "home", the same share of every launch, so a thread mostly reads
//   what it wrote in the previous kernel (an output split by rows is read back by rows) instead
//   of pulling it out of the other core's cache. It takes them front to back from a claim word
//   on a cache line of its own.
// - A participant whose home is done steals the others' chunks from the back of their homes, so
//   a thread that the OS deschedules (the machine may be shared) does not hold up the others.
// - Each participant adds the chunks it ran to the finished count once, when it runs out of
//   chunks to claim; the caller takes part and then spins until every chunk is done.
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
  explicit Pool(int threads) : m_threads(threads), m_homes(new Home[static_cast<size_t>(threads)]) {
    for (int i = 1; i < threads; ++i) m_workers.emplace_back([this, i] { workerLoop(i); });
  }
  ~Pool() {
    m_stop.store(true);
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      m_launch.word.fetch_add(uint64_t{1} << 32);
    }
    m_wake.notify_all();
    for (auto& w : m_workers) w.join();
  }
  int threads() const { return m_threads; }

  int32_t launch(KilnParallelTask task, void* closure, int64_t extent, int64_t chunksPerThread) {
    if (m_threads <= 1 || extent <= 1 || t_insideTask || m_busy.exchange(true, std::memory_order_acquire))
      return runSerial(task, closure, extent);
    int64_t chunks = std::min<int64_t>({extent, int64_t{m_threads} * chunksPerThread, 0xffff});
    m_launch.task.store(task, std::memory_order_relaxed);
    m_launch.closure.store(closure, std::memory_order_relaxed);
    m_launch.extent.store(extent, std::memory_order_relaxed);
    m_done.result.store(0, std::memory_order_relaxed);
    m_done.finished.store(0, std::memory_order_relaxed);
    uint64_t gen = (++m_launchCount) & 0xffffffffu;
    if (gen == 0) gen = ++m_launchCount & 0xffffffffu;  // 0 is "no launch yet"
    uint64_t word = gen << 32 | static_cast<uint64_t>(chunks);
    m_launch.word.store(word);  // seq_cst: ordered before the sleeper check below
    if (m_sleepers.load() > 0) {
      { std::lock_guard<std::mutex> lock(m_mutex); }
      m_wake.notify_all();
    }
    work(word, 0);
    for (int spins = 0; m_done.finished.load(std::memory_order_acquire) < chunks; ++spins) {
      if (spins < (1 << 16)) cpuRelax();
      else std::this_thread::yield();
    }
    int32_t result = m_done.result.load(std::memory_order_relaxed);
    m_busy.store(false, std::memory_order_release);
    return result;
  }

 private:
  /// A participant's claim word, alone on its cache line: (generation << 32) | (chunks taken
  /// from the front << 16) | (chunks taken from the back). A word of an older generation counts
  /// as nothing taken yet, so a launch need not reset the homes.
  struct alignas(64) Home {
    std::atomic<uint64_t> claim{0};
  };

  static int32_t runSerial(KilnParallelTask task, void* closure, int64_t extent) {
    bool outer = !t_insideTask;
    t_insideTask = true;
    int32_t r = task(0, extent, closure);
    if (outer) t_insideTask = false;
    return r;
  }

  /// Chunk index range [begin, end) of participant `who`'s home.
  std::pair<int64_t, int64_t> homeOf(int who, int64_t chunks) const {
    return {chunks * who / m_threads, chunks * (who + 1) / m_threads};
  }

  /// Claims one chunk of launch `gen` from `who`'s home: the owner from the front, others from
  /// the back. -1 when that home has none left or a newer launch has begun.
  int64_t claim(int who, bool owner, uint64_t gen, int64_t chunks) {
    auto [begin, end] = homeOf(who, chunks);
    int64_t size = end - begin;
    if (size <= 0) return -1;
    std::atomic<uint64_t>& word = m_homes[static_cast<size_t>(who)].claim;
    uint64_t seen = word.load(std::memory_order_acquire);
    uint64_t next = 0;
    int64_t index = 0;
    do {
      uint64_t wordGen = seen >> 32;
      if (wordGen != gen && static_cast<int32_t>(static_cast<uint32_t>(wordGen - gen)) > 0) return -1;
      int64_t front = wordGen == gen ? static_cast<int64_t>((seen >> 16) & 0xffffu) : 0;
      int64_t back = wordGen == gen ? static_cast<int64_t>(seen & 0xffffu) : 0;
      if (front + back >= size) return -1;
      if (owner) {
        index = begin + front;
        ++front;
      } else {
        index = end - 1 - back;
        ++back;
      }
      next = gen << 32 | static_cast<uint64_t>(front) << 16 | static_cast<uint64_t>(back);
    } while (!word.compare_exchange_weak(seen, next, std::memory_order_acq_rel));
    return index;
  }

  /// Runs chunks of the launch published as `word` (generation << 32 | chunk count): participant
  /// `self`'s home first, then whatever is left of the others'.
  void work(uint64_t word, int self) {
    uint64_t gen = word >> 32;
    int64_t chunks = static_cast<int64_t>(word & 0xffffu);
    int64_t ran = 0;
    for (int k = 0; k < m_threads; ++k) {
      int who = (self + k) % m_threads;
      for (int64_t index; (index = claim(who, k == 0, gen, chunks)) >= 0;) {
        // The successful claim synchronizes with the launch that published these.
        int64_t extent = m_launch.extent.load(std::memory_order_relaxed);
        KilnParallelTask task = m_launch.task.load(std::memory_order_relaxed);
        void* closure = m_launch.closure.load(std::memory_order_relaxed);
        int64_t begin = extent * index / chunks, end = extent * (index + 1) / chunks;
        t_insideTask = true;
        int32_t r = begin < end ? task(begin, end, closure) : 0;
        t_insideTask = false;
        if (r != 0) {
          int32_t expected = 0;
          m_done.result.compare_exchange_strong(expected, r);
        }
        ++ran;
      }
    }
    if (ran > 0) m_done.finished.fetch_add(ran, std::memory_order_acq_rel);
  }

  void workerLoop(int self) {
    ensureSignalStack();
    uint64_t seen = 0;
    for (;;) {
      uint64_t word = waitForLaunch(seen);
      if (m_stop.load()) return;
      seen = word;
      work(word, self);
    }
  }

  /// Spins, then sleeps, until the launch word differs from `seen`.
  uint64_t waitForLaunch(uint64_t seen) {
    auto deadline = std::chrono::steady_clock::now() + kSpinTime;
    for (int i = 0;; ++i) {
      uint64_t word = m_launch.word.load(std::memory_order_acquire);
      if (word != seen) return word;
      cpuRelax();
      if ((i & 255) == 255 && std::chrono::steady_clock::now() > deadline) break;
    }
    std::unique_lock<std::mutex> lock(m_mutex);
    m_sleepers.fetch_add(1);  // seq_cst: before re-reading the launch word
    m_wake.wait(lock, [&] { return m_launch.word.load() != seen; });
    m_sleepers.fetch_sub(1);
    return m_launch.word.load();
  }

  const int m_threads;
  std::vector<std::thread> m_workers;
  std::unique_ptr<Home[]> m_homes;
  std::atomic<bool> m_busy{false};
  std::atomic<bool> m_stop{false};
  std::atomic<int> m_sleepers{0};
  uint64_t m_launchCount = 0;
  /// What a launch publishes, on one cache line that the workers read: the launch word
  /// (generation << 32 | chunk count) last, so that reading it makes the rest visible.
  struct alignas(64) Launch {
    std::atomic<uint64_t> word{0};
    std::atomic<KilnParallelTask> task{nullptr};
    std::atomic<void*> closure{nullptr};
    std::atomic<int64_t> extent{0};
  } m_launch;
  /// What the participants report, on a line of its own that the caller spins on.
  struct alignas(64) Done {
    std::atomic<int64_t> finished{0};
    std::atomic<int32_t> result{0};
  } m_done;
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
