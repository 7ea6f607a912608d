// Runs child processes with a time limit: one-shot with captured output (torch.compile in
// Python), or long-lived workers spoken to in lines (tuning candidates, isolated measurements).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kiln::profiler {

struct ProcessResult {
  bool started = false;   // false: the program could not be executed (see error)
  bool timedOut = false;  // killed after the time limit
  bool cancelled = false; // killed because `cancelled` said so
  int exitCode = -1;      // exit status, or -signal when killed by a signal
  std::string out, err;   // captured stdout and stderr
  std::string error;      // why it did not start
};

/// Starts argv[0] (looked up in PATH) in a process group of its own, with the given descriptors
/// as its stdin, stdout and stderr (-1: /dev/null). Returns its pid, or -1 with `error` set.
int spawnProcess(const std::vector<std::string>& argv, int stdinFd, int stdoutFd, int stderrFd, std::string& error);

/// Runs argv[0] (looked up in PATH) with the given arguments; kills it (and its process group)
/// after `timeoutSeconds` (> 0), or as soon as `cancelled` (polled every 100 ms) returns true.
ProcessResult runProcess(const std::vector<std::string>& argv, double timeoutSeconds,
                         const std::function<bool()>& cancelled = {});

/// A child process spoken to in lines over its stdin and stdout: the tuning workers
/// (profiler/tune_measure.h) and the measuring worker (profiler/measure_worker.h). It runs in a
/// process group of its own and is killed with it; its stderr goes to /dev/null.
class WorkerProcess {
 public:
  WorkerProcess() = default;
  ~WorkerProcess() { stop(); }
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;
  WorkerProcess(WorkerProcess&& other) noexcept;
  WorkerProcess& operator=(WorkerProcess&&) = delete;

  bool running() const { return m_pid > 0; }
  int pid() const { return m_pid; }

  /// Starts the process; false with `why` when it cannot be.
  bool start(const std::vector<std::string>& argv, std::string& why);
  /// Writes `line` and a newline to its stdin; false when the pipe is closed.
  bool send(const std::string& line);
  /// The next line of its output (without the newline), or nothing with `failure` set:
  /// "timeout (10 s)", "crashed (signal 11)", "worker exited with code 1". After a timeout the
  /// process is killed unless `keepOnTimeout`; after any other failure it is gone.
  std::optional<std::string> receive(double timeoutSeconds, std::string& failure, bool keepOnTimeout = false);
  /// Sends `sig` to the process (not its group).
  void signal(int sig);
  /// Kills the process group without waiting for it: several workers killed first and stopped
  /// after die at once, not one after the other.
  void kill();
  /// Kills the process group and waits for it.
  void stop();
  /// The signal that ended the process (0: none, or still running).
  int endSignal() const { return m_endSignal; }

 private:
  std::string reap();

  int m_pid = -1;
  int m_in = -1, m_out = -1;
  int m_endSignal = 0;
  std::string m_buffer;
};

}  // namespace kiln::profiler
