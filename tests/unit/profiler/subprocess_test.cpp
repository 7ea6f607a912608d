// runProcess: real child processes (sh, sleep) with captured output, a time limit and a cancel.
#include "profiler/subprocess.h"

#include <gtest/gtest.h>

#include <signal.h>

#include <atomic>
#include <chrono>

namespace kiln::profiler {
namespace {

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(RunProcess, CapturesOutputAndExitCode) {
  ProcessResult r = runProcess({"sh", "-c", "echo out; echo err >&2; exit 3"}, 30);
  EXPECT_TRUE(r.started);
  EXPECT_FALSE(r.timedOut);
  EXPECT_FALSE(r.cancelled);
  EXPECT_EQ(r.exitCode, 3);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
}

TEST(RunProcess, AMissingProgramDoesNotStart) {
  ProcessResult r = runProcess({"kiln-no-such-program-here"}, 5);
  EXPECT_FALSE(r.started);
  EXPECT_FALSE(r.error.empty());
}

TEST(RunProcess, IsKilledAfterItsTimeLimit) {
  auto start = std::chrono::steady_clock::now();
  ProcessResult r = runProcess({"sleep", "60"}, 0.5);
  EXPECT_TRUE(r.timedOut);
  EXPECT_FALSE(r.cancelled);
  EXPECT_EQ(r.exitCode, -SIGKILL);
  EXPECT_LT(secondsSince(start), 30);  // killed, not waited for
}

TEST(RunProcess, IsKilledWithItsGroupWhenCancelled) {
  // The grandchild (sleep under sh) holds the pipes open: the whole group is killed.
  std::atomic<int> polls{0};
  auto start = std::chrono::steady_clock::now();
  ProcessResult r = runProcess({"sh", "-c", "sleep 60; echo never"}, 120, [&] { return ++polls > 3; });
  EXPECT_TRUE(r.cancelled);
  EXPECT_FALSE(r.timedOut);
  EXPECT_EQ(r.exitCode, -SIGKILL);
  EXPECT_EQ(r.out, "");
  EXPECT_LT(secondsSince(start), 30);
  // A predicate that never fires changes nothing.
  r = runProcess({"sh", "-c", "echo done"}, 30, [] { return false; });
  EXPECT_FALSE(r.cancelled);
  EXPECT_EQ(r.exitCode, 0);
  EXPECT_EQ(r.out, "done\n");
}

}  // namespace
}  // namespace kiln::profiler
