#include "profiler/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <utility>

extern char** environ;

namespace kiln::profiler {

int spawnProcess(const std::vector<std::string>& argv, int stdinFd, int stdoutFd, int stderrFd, std::string& error) {
  if (argv.empty()) {
    error = "no program given";
    return -1;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  const int fds[3] = {stdinFd, stdoutFd, stderrFd};
  for (int target = 0; target < 3; ++target) {
    if (fds[target] >= 0)
      posix_spawn_file_actions_adddup2(&actions, fds[target], target);
    else
      posix_spawn_file_actions_addopen(&actions, target, "/dev/null", target == 0 ? O_RDONLY : O_WRONLY, 0);
  }
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, args[0], &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    error = argv[0] + ": " + std::strerror(rc);
    return -1;
  }
  return pid;
}

ProcessResult runProcess(const std::vector<std::string>& argv, double timeoutSeconds,
                         const std::function<bool()>& cancelled) {
  ProcessResult result;
  if (argv.empty()) {
    result.error = "no program given";
    return result;
  }
  int outPipe[2], errPipe[2];
  if (pipe2(outPipe, O_CLOEXEC) != 0) {
    result.error = std::strerror(errno);
    return result;
  }
  if (pipe2(errPipe, O_CLOEXEC) != 0) {
    result.error = std::strerror(errno);
    close(outPipe[0]);
    close(outPipe[1]);
    return result;
  }
  pid_t pid = spawnProcess(argv, -1, outPipe[1], errPipe[1], result.error);
  close(outPipe[1]);
  close(errPipe[1]);
  if (pid < 0) {
    close(outPipe[0]);
    close(errPipe[0]);
    return result;
  }
  result.started = true;

  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeoutSeconds);
  pollfd fds[2] = {{outPipe[0], POLLIN, 0}, {errPipe[0], POLLIN, 0}};
  int open = 2;
  char buf[4096];
  while (open > 0) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timedOut = true;
      kill(-pid, SIGKILL);
      break;
    }
    if (cancelled && cancelled()) {
      result.cancelled = true;
      kill(-pid, SIGKILL);
      break;
    }
    int n = poll(fds, 2, static_cast<int>(std::min<int64_t>(left.count(), cancelled ? 100 : 1000)));
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t got = read(fds[i].fd, buf, sizeof buf);
      if (got > 0) {
        (i == 0 ? result.out : result.err).append(buf, static_cast<size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) close(f.fd);
  // The child may outlive its pipes: keep the deadline while waiting for it too.
  int status = 0;
  for (;;) {
    bool killed = result.timedOut || result.cancelled;
    pid_t w = waitpid(pid, &status, killed ? 0 : WNOHANG);
    if (w == pid || (w < 0 && errno != EINTR)) break;
    if (w == 0 && std::chrono::steady_clock::now() >= deadline) {
      result.timedOut = true;
      kill(-pid, SIGKILL);
    } else if (w == 0 && cancelled && cancelled()) {
      result.cancelled = true;
      kill(-pid, SIGKILL);
    } else if (w == 0) {
      usleep(10000);
    }
  }
  if (WIFEXITED(status))
    result.exitCode = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    result.exitCode = -WTERMSIG(status);
  return result;
}

// ---- WorkerProcess ------------------------------------------------------------------------------

WorkerProcess::WorkerProcess(WorkerProcess&& other) noexcept
    : m_pid(std::exchange(other.m_pid, -1)),
      m_in(std::exchange(other.m_in, -1)),
      m_out(std::exchange(other.m_out, -1)),
      m_endSignal(other.m_endSignal),
      m_buffer(std::move(other.m_buffer)) {}

bool WorkerProcess::start(const std::vector<std::string>& argv, std::string& why) {
  stop();
  int toChild[2], fromChild[2];
  if (pipe2(toChild, O_CLOEXEC) != 0) {
    why = std::strerror(errno);
    return false;
  }
  if (pipe2(fromChild, O_CLOEXEC) != 0) {
    why = std::strerror(errno);
    close(toChild[0]);
    close(toChild[1]);
    return false;
  }
  pid_t pid = spawnProcess(argv, toChild[0], fromChild[1], -1, why);
  close(toChild[0]);
  close(fromChild[1]);
  if (pid < 0) {
    close(toChild[1]);
    close(fromChild[0]);
    return false;
  }
  m_pid = pid;
  m_in = toChild[1];
  m_out = fromChild[0];
  m_endSignal = 0;
  m_buffer.clear();
  return true;
}

bool WorkerProcess::send(const std::string& line) {
  if (m_in < 0) return false;
  std::string data = line + "\n";
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(m_in, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

std::optional<std::string> WorkerProcess::receive(double timeoutSeconds, std::string& failure, bool keepOnTimeout) {
  using Clock = std::chrono::steady_clock;
  auto deadline = Clock::now() + std::chrono::duration<double>(timeoutSeconds);
  for (;;) {
    size_t nl = m_buffer.find('\n');
    if (nl != std::string::npos) {
      std::string line = m_buffer.substr(0, nl);
      m_buffer.erase(0, nl + 1);
      return line;
    }
    if (m_out < 0) {
      failure = "worker not running";
      return std::nullopt;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      char text[48];
      std::snprintf(text, sizeof text, "timeout (%g s)", timeoutSeconds);
      failure = text;
      if (!keepOnTimeout) stop();
      return std::nullopt;
    }
    pollfd fd{m_out, POLLIN, 0};
    int n = poll(&fd, 1, static_cast<int>(std::min<int64_t>(left, 500)));
    if (n < 0 && errno != EINTR) {
      failure = std::string("poll: ") + std::strerror(errno);
      stop();
      return std::nullopt;
    }
    if (n <= 0) continue;
    char buf[4096];
    ssize_t got = read(m_out, buf, sizeof buf);
    if (got > 0) {
      m_buffer.append(buf, static_cast<size_t>(got));
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    failure = reap();
    return std::nullopt;
  }
}

void WorkerProcess::signal(int sig) {
  if (m_pid > 0) ::kill(m_pid, sig);
}

void WorkerProcess::kill() {
  if (m_pid > 0) ::kill(-m_pid, SIGKILL);
}

void WorkerProcess::stop() {
  if (m_pid <= 0) return;
  kill();
  reap();
}

std::string WorkerProcess::reap() {
  int status = 0;
  std::string how = "worker ended";
  pid_t w = -1;
  if (m_pid > 0) {
    do w = waitpid(m_pid, &status, 0);
    while (w < 0 && errno == EINTR);
  }
  if (w == m_pid) {
    if (WIFSIGNALED(status)) {
      m_endSignal = WTERMSIG(status);
      how = "crashed (signal " + std::to_string(m_endSignal) + ")";
    } else if (WIFEXITED(status)) {
      how = "worker exited with code " + std::to_string(WEXITSTATUS(status));
    }
  }
  if (m_in >= 0) close(m_in);
  if (m_out >= 0) close(m_out);
  m_in = m_out = m_pid = -1;
  return how;
}

}  // namespace kiln::profiler
