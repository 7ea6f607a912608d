// Runs a child process with a time limit and captures its output: for measurements that must
// happen outside this process (torch.compile in Python; later, tuning candidates).
#pragma once

#include <string>
#include <vector>

namespace kiln::profiler {

struct ProcessResult {
  bool started = false;   // false: the program could not be executed (see error)
  bool timedOut = false;  // killed after the time limit
  int exitCode = -1;      // exit status, or -signal when killed by a signal
  std::string out, err;   // captured stdout and stderr
  std::string error;      // why it did not start
};

/// Starts argv[0] (looked up in PATH) in a process group of its own, with the given descriptors
/// as its stdin, stdout and stderr (-1: /dev/null). Returns its pid, or -1 with `error` set.
int spawnProcess(const std::vector<std::string>& argv, int stdinFd, int stdoutFd, int stderrFd, std::string& error);

/// Runs argv[0] (looked up in PATH) with the given arguments; kills it (and its process group)
/// after `timeoutSeconds` (> 0).
ProcessResult runProcess(const std::vector<std::string>& argv, double timeoutSeconds);

}  // namespace kiln::profiler
