// Measuring generated code in a worker process, so a kernel that crashes or hangs takes down the
// worker and not the caller (the CLI's process, the Workbench). The application serves the
// requests (`kiln measure-worker`, app/); this file holds what does not depend on them: the
// worker's fault reporting and the parent's side with its time limits.
//
// One request per worker process, JSON lines over stdin/stdout (the tune-worker's style):
//
//   → {"op":"profile",...}                                   the request (app/ defines its fields)
//   ← {"event":"measuring"}                                  compiled: the measuring limit starts
//   ← {"event":"fault","signal":11,"kernel":"fused_conv2d_relu_3"}   from the fault handler
//   ← {"event":"stuck","kernel":"fused_conv2d_relu_3"}       answering SIGUSR1 after the limit
//   ← {"ok":true,"result":{...}} | {"ok":false,"error":"...","kind":3}
//
// Code generation gets its own, longer limit: only running kernels is held to the short one.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace kiln::profiler {

/// Worker side: enables the runtime's kernel watch (runtime/graph_executor.h) and installs
/// handlers that report the kernel being run, on stdout, as a protocol line: SIGSEGV, SIGBUS,
/// SIGFPE, SIGILL and SIGABRT then end the process by the same signal; SIGUSR1 (the parent's
/// time limit ran out) lets it go on until the parent kills it. The fault handlers run on an
/// alternate signal stack (runtime::ensureSignalStack), so a kernel that overflows its stack is
/// named too. Calls dieWithParent().
void installWorkerFaultHandlers();
/// Worker side: the process is killed when its parent dies (PR_SET_PDEATHSIG), so a tuner or
/// profiler killed with SIGKILL leaves no worker behind.
void dieWithParent();
/// Worker side: writes one protocol line on stdout and flushes it.
void sendWorkerLine(const std::string& jsonLine);

struct IsolatedRun {
  std::string reply;    // the final {"ok":...} line; empty on failure
  std::string failure;  // "kernel crashed (signal 11) in fused_conv2d_relu_3", "timed out after 30 s
                        // in fused_conv2d_relu_3", "cannot start kiln: ...": one line, for the user
  bool crashed = false, timedOut = false;
  bool ok() const { return failure.empty(); }
};

struct IsolationLimits {
  double measureSeconds = 30;   // after the worker says it is measuring
  double compileSeconds = 600;  // before that
};

/// Parent side: starts `argv`, sends `request` (one JSON line) and waits for the reply within
/// the limits. A worker that crashes or runs out of time is killed; the result says how and in
/// which kernel. `cancelled` (optional) is polled about twice a second: true kills the worker
/// and fails with "cancelled".
IsolatedRun runIsolated(const std::vector<std::string>& argv, const std::string& request, const IsolationLimits& limits,
                        const std::function<bool()>& cancelled = {});

}  // namespace kiln::profiler
