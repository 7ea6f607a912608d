// Measurements in a worker process; see measure_worker.h.
#include "profiler/measure_worker.h"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>

#include <nlohmann/json.hpp>

#include "profiler/subprocess.h"
#include "runtime/graph_executor.h"
#include "runtime/thread_pool.h"

namespace kiln::profiler {

using nlohmann::json;

// ---- the worker ---------------------------------------------------------------------------------

namespace {

/// Appends `text` to buf[len..cap) (async-signal-safe).
size_t append(char* buf, size_t len, size_t cap, const char* text, bool nameOnly = false) {
  for (; text && *text && len + 1 < cap; ++text) {
    char c = *text;
    // Kernel names are identifiers; anything else would need JSON escaping.
    if (nameOnly && !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                      c == '.' || c == '-'))
      continue;
    buf[len++] = c;
  }
  return len;
}

/// Writes {"event":EVENT,"signal":N,"kernel":"NAME"} and a newline to stdout (async-signal-safe).
void reportKernel(const char* event, int sig) {
  char buf[512];
  size_t n = 0;
  n = append(buf, n, sizeof buf, "\n{\"event\":\"");  // a fresh line even after a torn one
  n = append(buf, n, sizeof buf, event);
  n = append(buf, n, sizeof buf, "\",\"signal\":");
  char digits[8];
  int d = 0;
  for (int v = sig; d == 0 || v > 0; v /= 10) digits[d++] = static_cast<char>('0' + v % 10);
  while (d > 0 && n + 1 < sizeof buf) buf[n++] = digits[--d];
  n = append(buf, n, sizeof buf, ",\"kernel\":\"");
  n = append(buf, n, sizeof buf, runtime::watchedKernel(), true);
  n = append(buf, n, sizeof buf, "\"}\n");
  for (size_t done = 0; done < n;) {
    ssize_t w = write(STDOUT_FILENO, buf + done, n - done);
    if (w <= 0) break;
    done += static_cast<size_t>(w);
  }
}

void onFault(int sig) {
  reportKernel("fault", sig);
  // SA_RESETHAND restored the default action: die by the same signal, so the parent sees it.
  raise(sig);
}

void onStuck(int sig) { reportKernel("stuck", sig); }

}  // namespace

void dieWithParent() {
  // A parent killed with SIGKILL cannot kill its workers: they go with it instead of running on
  // (a hanging kernel would loop forever).
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() == 1) _exit(1);
}

void installWorkerFaultHandlers() {
  dieWithParent();
  runtime::enableKernelWatch();
  // A kernel that overflows its stack gets SIGSEGV with no stack left to run the handler on: the
  // handler runs on an alternate stack (this thread's here; the runtime's pool threads make their
  // own), so that crash is named as well.
  runtime::ensureSignalStack();
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sigemptyset(&sa.sa_mask);
  sa.sa_handler = onFault;
  sa.sa_flags = SA_RESETHAND | SA_NODEFER | SA_ONSTACK;
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) sigaction(sig, &sa, nullptr);
  sa.sa_handler = onStuck;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &sa, nullptr);
}

void sendWorkerLine(const std::string& jsonLine) {
  std::cout << jsonLine << '\n';
  std::cout.flush();
}

// ---- the parent ---------------------------------------------------------------------------------

namespace {

std::string seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", s);
  return text;
}

}  // namespace

IsolatedRun runIsolated(const std::vector<std::string>& argv, const std::string& request, const IsolationLimits& limits,
                        const std::function<bool()>& cancelled) {
  using Clock = std::chrono::steady_clock;
  // A worker that dies before reading its request must not kill the caller with SIGPIPE.
  signal(SIGPIPE, SIG_IGN);
  IsolatedRun run;
  WorkerProcess worker;
  std::string why;
  if (!worker.start(argv, why)) {
    run.failure = "cannot start the measuring worker: " + why;
    return run;
  }
  if (!worker.send(request)) {
    std::string how;
    worker.receive(1.0, how);
    run.failure = "the measuring worker ended before its request: " + how;
    return run;
  }
  bool measuring = false;
  std::string kernel;
  auto deadline = Clock::now() + std::chrono::duration<double>(limits.compileSeconds);
  for (;;) {
    // Before every line, not only when the worker is quiet (as in bench.cpp's awaitReply).
    if (cancelled && cancelled()) {
      worker.stop();
      run.failure = "cancelled";
      return run;
    }
    double left = std::chrono::duration<double>(deadline - Clock::now()).count();
    std::string failure;
    auto line = worker.receive(std::clamp(left, 0.0, 0.5), failure, true);
    if (line) {
      json msg = json::parse(*line, nullptr, false);
      if (msg.is_discarded() || !msg.is_object()) continue;  // not protocol output
      std::string event = msg.value("event", "");
      if (event == "measuring") {
        measuring = true;
        deadline = Clock::now() + std::chrono::duration<double>(limits.measureSeconds);
      } else if (event == "fault" || event == "stuck") {
        kernel = msg.value("kernel", "");
      } else if (msg.contains("ok")) {
        run.reply = *line;
        worker.stop();
        return run;
      }
      continue;
    }
    if (failure.rfind("timeout", 0) == 0) {
      if (Clock::now() < deadline) continue;
      // Out of time: ask the worker where it is, give it a moment to answer, then kill it.
      worker.signal(SIGUSR1);
      auto grace = Clock::now() + std::chrono::seconds(1);
      while (Clock::now() < grace) {
        std::string ignored;
        auto l = worker.receive(0.2, ignored, true);
        if (!l) {
          if (ignored.rfind("timeout", 0) == 0) continue;
          break;
        }
        json msg = json::parse(*l, nullptr, false);
        if (!msg.is_discarded() && msg.is_object() && msg.value("event", "") == "stuck") {
          kernel = msg.value("kernel", "");
          break;
        }
      }
      worker.stop();
      run.timedOut = true;
      run.failure = measuring ? "timed out after " + seconds(limits.measureSeconds) : "compilation timed out after " + seconds(limits.compileSeconds);
      if (!kernel.empty()) run.failure += " in " + kernel;
      return run;
    }
    // The worker ended without a reply.
    if (worker.endSignal() > 0) {
      run.crashed = true;
      std::string what = kernel.empty() ? "the measuring worker crashed" : "kernel crashed";
      run.failure = what + " (signal " + std::to_string(worker.endSignal()) + ")";
      if (!kernel.empty()) run.failure += " in " + kernel;
      return run;
    }
    run.failure = "the measuring " + failure;
    return run;
  }
}

}  // namespace kiln::profiler
