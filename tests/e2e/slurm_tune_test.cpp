// kiln tune --slurm against a real one-node Slurm cluster that this test starts on loopback as
// its own processes: munged with its own key and socket, slurmctld and slurmd with a slurm.conf
// written into a temporary folder (free ports, state and spool inside it, $SLURM_CONF pointing at
// it), all stopped at the end even when a test fails (and sent SIGTERM should this process die).
// Real sbatch, scontrol and scancel; real array tasks running `kiln tune-slurm-task`, real tuning
// workers measuring JIT-compiled candidates. Skipped only when slurmctld is not installed
// (scripts/install-deps.sh installs slurm-wlm and munge). No timing thresholds.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "runtime/npy.h"
#include "tests/e2e/process.h"

namespace {

namespace fs = std::filesystem;
using kiln::testing_support::Outcome;
using Clock = std::chrono::steady_clock;

std::string readFile(const fs::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

void writeFile(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

/// A program in PATH or in /usr/sbin (the daemons), "" when neither has it.
std::string program(const std::string& name) {
  std::istringstream path(std::string(std::getenv("PATH") ? std::getenv("PATH") : "") + ":/usr/sbin:/sbin");
  std::string dir;
  while (std::getline(path, dir, ':'))
    if (!dir.empty() && ::access((fs::path(dir) / name).c_str(), X_OK) == 0) return (fs::path(dir) / name).string();
  return "";
}

int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

/// Starts argv with stdout and stderr into `log`, in a process group of its own, sent SIGTERM
/// when this process dies. Returns its pid.
pid_t spawn(const std::vector<std::string>& argv, const fs::path& log) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(127);
    ::setpgid(0, 0);
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int null = ::open("/dev/null", O_RDONLY);
    ::dup2(null, 0);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  return pid;
}

/// Waits up to `seconds` for pid to end; its exit code, 128 + signal, or -1 if it is still running.
int waitFor(pid_t pid, double seconds) {
  auto end = Clock::now() + std::chrono::duration<double>(seconds);
  while (true) {
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (r < 0) return -2;
    if (Clock::now() > end) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void stop(pid_t pid) {
  if (pid <= 0) return;
  ::kill(pid, SIGTERM);
  if (waitFor(pid, 15) == -1) {
    ::kill(pid, SIGKILL);
    waitFor(pid, 5);
  }
}

Outcome shell(const std::string& command) {
  fs::path err = fs::temp_directory_path() / ("kiln_slurm_stderr_" + std::to_string(::getpid()));
  Outcome o = kiln::testing_support::runProcess(command, err.string());
  fs::remove(err);
  return o;
}

/// The cluster: munged, slurmctld, slurmd, on loopback, everything in one temporary folder.
class Cluster {
 public:
  std::string skipReason;  // set when Slurm is not installed
  std::string startError;  // set when it is but the cluster did not come up
  fs::path dir;
  fs::path conf;

  void start() {
    for (const char* name : {"slurmctld", "slurmd", "munged", "sbatch", "scontrol", "scancel", "sinfo", "squeue"})
      if (program(name).empty()) {
        skipReason = std::string(name) + " is not installed (scripts/install-deps.sh installs slurm-wlm and munge)";
        return;
      }
    dir = fs::temp_directory_path() / ("kiln_slurm_test_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir / "state");
    fs::create_directories(dir / "spool");
    fs::create_directories(dir / "work");
    // munged refuses a socket whose folder is not searchable by all, and a key others can read.
    fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                             fs::perms::others_read | fs::perms::others_exec);
    fs::permissions(dir / "work", fs::perms::all);
    {
      std::random_device rd;
      std::string key(1024, '\0');
      for (char& c : key) c = static_cast<char>(rd());
      writeFile(dir / "munge.key", key);
      ::chmod((dir / "munge.key").c_str(), 0400);
    }
    std::string socket = (dir / "munge.sock").string();
    m_munged = spawn({program("munged"), "--foreground", "--key-file=" + (dir / "munge.key").string(),
                      "--socket=" + socket, "--pid-file=" + (dir / "munged.pid").string(),
                      "--log-file=" + (dir / "munged.log").string(), "--seed-file=" + (dir / "munged.seed").string()},
                     dir / "munged.out");
    if (!waitUntil(10, [&] { return fs::exists(socket); })) {
      startError = "munged did not start: " + readFile(dir / "munged.out");
      return;
    }

    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    std::string hostname = host;
    hostname = hostname.substr(0, hostname.find('.'));
    const passwd* pw = ::getpwuid(::geteuid());
    std::string user = pw ? pw->pw_name : "root";
    int cpus = std::max(2u, std::thread::hardware_concurrency());
    conf = dir / "slurm.conf";
    std::ostringstream c;
    c << "ClusterName=kilntest\n"
      << "SlurmctldHost=" << hostname << "(127.0.0.1)\n"
      << "SlurmctldPort=" << freePort() << "\n"
      << "SlurmdPort=" << freePort() << "\n"
      << "AuthType=auth/munge\nCredType=cred/munge\n"
      << "AuthInfo=socket=" << socket << "\n"
      << "SlurmUser=" << user << "\nSlurmdUser=" << user << "\n"
      << "StateSaveLocation=" << (dir / "state").string() << "\n"
      << "SlurmdSpoolDir=" << (dir / "spool").string() << "\n"
      << "SlurmctldPidFile=" << (dir / "slurmctld.pid").string() << "\n"
      << "SlurmdPidFile=" << (dir / "slurmd.pid").string() << "\n"
      << "SlurmctldLogFile=" << (dir / "slurmctld.log").string() << "\n"
      << "SlurmdLogFile=" << (dir / "slurmd.log").string() << "\n"
      << "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nJobAcctGatherType=jobacct_gather/none\n"
      << "AccountingStorageType=accounting_storage/none\nJobCompType=jobcomp/none\nMpiDefault=none\n"
      << "SchedulerType=sched/builtin\nSelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\n"
      << "ReturnToService=2\nSlurmdParameters=config_overrides\nMailProg=/bin/true\n"
      << "NodeName=" << hostname << " NodeAddr=127.0.0.1 CPUs=" << cpus << " State=UNKNOWN\n"
      << "PartitionName=debug Nodes=" << hostname << " Default=YES MaxTime=INFINITE State=UP\n";
    writeFile(conf, c.str());
    ::setenv("SLURM_CONF", conf.c_str(), 1);

    m_slurmctld = spawn({program("slurmctld"), "-D", "-i", "-f", conf.string()}, dir / "slurmctld.out");
    m_slurmd = spawn({program("slurmd"), "-D", "-f", conf.string()}, dir / "slurmd.out");
    if (!waitUntil(60, [&] { return shell("sinfo --noheader --format=%T").out.find("idle") != std::string::npos; })) {
      startError = "the node did not become idle within 60 s; sinfo: " + shell("sinfo 2>&1").out +
                   "\nslurmctld: " + readFile(dir / "slurmctld.out") + "\nslurmd: " + readFile(dir / "slurmd.out");
    }
  }

  /// Cancels every job, stops the daemons and whatever this cluster started, removes the folder.
  void teardown() {
    if (!conf.empty()) {
      shell("scancel --user=$(id -un) 2>/dev/null");
      waitUntil(30, [&] { return shell("squeue --noheader 2>/dev/null").out.empty(); });
    }
    stop(m_slurmd);
    stop(m_slurmctld);
    // Job steps outlive a stopped slurmd: end every process whose environment names this
    // cluster's configuration (slurmstepd, the batch scripts, kiln and its tuning workers).
    if (!conf.empty()) {
      std::string marker = "SLURM_CONF=" + conf.string();
      for (const auto& entry : fs::directory_iterator("/proc")) {
        std::string name = entry.path().filename().string();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        pid_t pid = std::stoi(name);
        if (pid == ::getpid() || pid == m_munged) continue;
        std::string env = readFile(entry.path() / "environ");
        std::replace(env.begin(), env.end(), '\0', '\n');
        if (("\n" + env + "\n").find("\n" + marker + "\n") != std::string::npos) ::kill(pid, SIGKILL);
      }
    }
    stop(m_munged);
    if (!dir.empty() && !::testing::Test::HasFailure()) fs::remove_all(dir);
  }

  static bool waitUntil(double seconds, const std::function<bool()>& done) {
    auto end = Clock::now() + std::chrono::duration<double>(seconds);
    while (Clock::now() < end) {
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return done();
  }

 private:
  pid_t m_munged = -1, m_slurmctld = -1, m_slurmd = -1;
};

Cluster* g_cluster = nullptr;

class SlurmTune : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    g_cluster = new Cluster;
    g_cluster->start();
  }
  static void TearDownTestSuite() {
    g_cluster->teardown();
    delete g_cluster;
    g_cluster = nullptr;
  }
  void SetUp() override {
    if (!g_cluster->skipReason.empty()) GTEST_SKIP() << g_cluster->skipReason;
    ASSERT_TRUE(g_cluster->startError.empty()) << g_cluster->startError;
    std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    m_dir = g_cluster->dir / "work" / test;
    fs::create_directories(m_dir);
    fs::permissions(m_dir, fs::perms::all);
  }
  fs::path m_dir;
};

std::string model() { return std::string(KILN_MODELS_DIR) + "/ops/inception_parallel.pt"; }

Outcome kiln(const std::string& args, const std::string& env = "") {
  return shell(env + " " + std::string(KILN_BINARY) + " " + args);
}

/// Records of a JSON-lines file (every line must parse: a torn line fails the test).
std::vector<nlohmann::json> records(const fs::path& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << path << ": torn line " << line;
    if (!j.is_discarded()) out.push_back(j);
  }
  return out;
}

int searchCount(const std::vector<nlohmann::json>& rs) {
  int n = 0;
  for (const auto& r : rs) n += r["tuner"] != "confirm";
  return n;
}

/// The budget of each array index's share (the coordinator's plan).
std::vector<int> shareBudgets(const fs::path& slurmDir) {
  std::ifstream in(slurmDir / "plan.json");
  nlohmann::json plan = nlohmann::json::parse(in);
  std::vector<int> out;
  for (const auto& share : plan["shares"]) {
    int b = 0;
    for (const auto& t : share) b += t["budget"].get<int>();
    out.push_back(b);
  }
  return out;
}

std::string common(const fs::path& dir) {
  return " --tuner random --threads 1 --no-compare --slurm --array-size 2 --slurm-dir " + (dir / "slurm").string() +
         " --records " + (dir / "merged.jsonl").string() + " --db " + (dir / "store.db").string();
}

TEST_F(SlurmTune, ArrayTasksRecordsAreMergedAndTheBuildUsesThem) {
  Outcome o = kiln("tune " + model() + " --trials 3 --json " + (m_dir / "tune.json").string() + common(m_dir));
  ASSERT_EQ(o.exitCode, 0) << o.out << o.err;
  fs::path slurm = m_dir / "slurm";
  // Two array tasks, each with its own records file of its own keys.
  std::vector<nlohmann::json> r0 = records(slurm / "records-0.jsonl"), r1 = records(slurm / "records-1.jsonl");
  ASSERT_FALSE(r0.empty());
  ASSERT_FALSE(r1.empty());
  std::set<std::string> k0, k1;
  for (const auto& r : r0) k0.insert(r["key"].get<std::string>());
  for (const auto& r : r1) k1.insert(r["key"].get<std::string>());
  for (const auto& k : k0) EXPECT_FALSE(k1.count(k)) << "key in both array tasks: " << k;
  std::vector<int> budgets = shareBudgets(slurm);
  ASSERT_EQ(budgets.size(), 2u);
  EXPECT_EQ(searchCount(r0), budgets[0]);
  EXPECT_EQ(searchCount(r1), budgets[1]);
  EXPECT_EQ(k0.size() + k1.size(), 7u) << "inception_parallel has seven tuning tasks: four convolutions, two "
                                          "layout transforms and the concatenation (element nests)";

  // The merged file holds exactly what the array tasks measured, grouped by key.
  std::vector<nlohmann::json> merged = records(m_dir / "merged.jsonl");
  EXPECT_EQ(merged.size(), r0.size() + r1.size());
  std::multiset<std::string> a, b;
  for (const auto& r : merged) a.insert(r.dump());
  for (const auto& r : r0) b.insert(r.dump());
  for (const auto& r : r1) b.insert(r.dump());
  EXPECT_EQ(a, b);
  std::set<std::string> seen;
  std::string previous;
  for (const auto& r : merged) {
    std::string key = r["key"];
    if (key != previous) {
      EXPECT_TRUE(seen.insert(key).second) << "records of " << key << " are not together";
    }
    previous = key;
  }
  EXPECT_NE(o.out.find(std::to_string(merged.size()) + " record(s) merged"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("array task 0: COMPLETED"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("array task 1: COMPLETED"), std::string::npos) << o.out;
  // The logs are the array tasks' own.
  std::string job = readFile(slurm / "job-id");
  job.erase(job.find_last_not_of("\n") + 1);
  EXPECT_NE(readFile(slurm / ("slurm-" + job + "_1.out")).find("array task 1"), std::string::npos);

  // A rerun resumes: the records are seeded into the array tasks, nothing new is measured.
  Outcome again = kiln("tune " + model() + " --trials 3" + common(m_dir));
  ASSERT_EQ(again.exitCode, 0) << again.out << again.err;
  EXPECT_NE(again.out.find("0 measured"), std::string::npos) << again.out;
  EXPECT_EQ(records(m_dir / "merged.jsonl").size(), merged.size());

  // The build with the merged records runs and matches the untuned one.
  kiln::runtime::Tensor x = kiln::runtime::Tensor::zeros(kiln::runtime::DType::Float32, {1, 16, 9, 9});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(i % 13) / 6.0f - 1.0f;
  std::string in = (m_dir / "x.npy").string(), ya = (m_dir / "a.npy").string(), yb = (m_dir / "b.npy").string();
  kiln::runtime::writeNpy(in, x);
  ASSERT_EQ(kiln("run " + model() + " --input " + in + " --output " + ya).exitCode, 0);
  Outcome tuned = kiln("run " + model() + " --input " + in + " --output " + yb + " --records " +
                       (m_dir / "merged.jsonl").string());
  ASSERT_EQ(tuned.exitCode, 0) << tuned.err;
  kiln::runtime::Tensor ta = kiln::runtime::readNpy(ya), tb = kiln::runtime::readNpy(yb);
  ASSERT_EQ(ta.numel(), tb.numel());
  for (int64_t i = 0; i < ta.numel(); ++i) ASSERT_NEAR(ta.data<float>()[i], tb.data<float>()[i], 1e-4) << i;
  // ... and the build did apply them: each key's schedule is its latest confirmation round's fastest.
  Outcome ir = kiln("ir " + model() + " --stage lowered --records " + (m_dir / "merged.jsonl").string());
  ASSERT_EQ(ir.exitCode, 0) << ir.err;
  std::ifstream summary(m_dir / "tune.json");
  nlohmann::json result = nlohmann::json::parse(summary);
  ASSERT_EQ(result["tasks"].size(), 7u);
  for (const auto& t : result["tasks"]) {
    ASSERT_NE(t["best_knobs"], "") << t.dump();
    EXPECT_NE(ir.out.find("// schedule: " + t["best_knobs"].get<std::string>()), std::string::npos) << t.dump();
  }
}

/// Starts the coordinator in the background; stdout and stderr into files of `dir`.
pid_t startCoordinator(const fs::path& dir, const std::string& args) {
  std::vector<std::string> argv{KILN_BINARY, "tune", model()};
  std::istringstream in(args);
  std::string word;
  while (in >> word) argv.push_back(word);
  std::vector<char*> c;
  for (auto& a : argv) c.push_back(a.data());
  c.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    int out = ::open((dir / "out.txt").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = ::open((dir / "err.txt").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, 1);
    ::dup2(err, 2);
    ::execv(c[0], c.data());
    ::_exit(127);
  }
  return pid;
}

std::string jobOf(const fs::path& slurmDir) {
  std::string job = readFile(slurmDir / "job-id");
  job.erase(job.find_last_not_of("\n") + 1);
  return job;
}

TEST_F(SlurmTune, AKilledArrayTaskLosesOnlyItsInFlightCandidate) {
  fs::path slurm = m_dir / "slurm";
  pid_t coordinator = startCoordinator(m_dir, "--trials 5" + common(m_dir));
  // Once array task 1 has written a record, cancel it alone (scancel JOB_1).
  bool seen = Cluster::waitUntil(600, [&] {
    return fs::exists(slurm / "job-id") && fs::exists(slurm / "records-1.jsonl") &&
           !records(slurm / "records-1.jsonl").empty();
  });
  ASSERT_TRUE(seen) << readFile(m_dir / "err.txt");
  std::string job = jobOf(slurm);
  Outcome cancel = shell("scancel " + job + "_1");
  ASSERT_EQ(cancel.exitCode, 0) << cancel.err;
  int rc = waitFor(coordinator, 900);
  std::string out = readFile(m_dir / "out.txt"), err = readFile(m_dir / "err.txt");
  ASSERT_NE(rc, -1) << "the coordinator did not end";
  // The failed task is one error line naming its log; the exit code is the I/O kind.
  EXPECT_EQ(rc, 6) << out << err;
  fs::path log = slurm / ("slurm-" + job + "_1.out");
  EXPECT_NE(err.find("error: " + log.string() + ": array task 1 of job " + job + " ended CANCELLED"), std::string::npos)
      << err;

  std::vector<int> budgets = shareBudgets(slurm);
  std::vector<nlohmann::json> r0 = records(slurm / "records-0.jsonl"), r1 = records(slurm / "records-1.jsonl");
  // The other array task measured its whole share; the cancelled one less than its share, and
  // everything either wrote was merged.
  EXPECT_EQ(searchCount(r0), budgets[0]);
  EXPECT_GE(searchCount(r1), 1);
  EXPECT_LT(searchCount(r1), budgets[1]) << "array task 1 ended before it was cancelled";
  std::vector<nlohmann::json> merged = records(m_dir / "merged.jsonl");
  EXPECT_EQ(merged.size(), r0.size() + r1.size());
  EXPECT_NE(out.find("array task 0: COMPLETED"), std::string::npos) << out;
  EXPECT_NE(out.find("array task 1: CANCELLED"), std::string::npos) << out;

  // Resuming measures only what the cancelled task did not.
  Outcome again = kiln("tune " + model() + " --trials 5" + common(m_dir));
  ASSERT_EQ(again.exitCode, 0) << again.out << again.err;
  merged = records(m_dir / "merged.jsonl");
  std::map<std::string, int> perKey;
  for (const auto& r : merged) perKey[r["key"].get<std::string>()] += r["tuner"] != "confirm";
  int total = 0;
  for (const auto& [key, n] : perKey) total += n;
  EXPECT_EQ(total, budgets[0] + budgets[1]);
  std::set<std::string> configs;
  for (const auto& r : merged) {
    if (r["tuner"] == "confirm") continue;
    EXPECT_TRUE(configs.insert(r["key"].dump() + r["knobs"].dump()).second) << r.dump();
  }
}

TEST_F(SlurmTune, SigtermOfTheCoordinatorCancelsTheArrayAndKeepsWhatWasMeasured) {
  fs::path slurm = m_dir / "slurm";
  pid_t coordinator = startCoordinator(m_dir, "--trials 5" + common(m_dir));
  bool seen = Cluster::waitUntil(600, [&] {
    return fs::exists(slurm / "records-0.jsonl") && !records(slurm / "records-0.jsonl").empty();
  });
  ASSERT_TRUE(seen) << readFile(m_dir / "err.txt");
  std::string job = jobOf(slurm);
  ::kill(coordinator, SIGTERM);
  int rc = waitFor(coordinator, 300);
  std::string out = readFile(m_dir / "out.txt"), err = readFile(m_dir / "err.txt");
  ASSERT_EQ(rc, 0) << out << err;
  EXPECT_NE(out.find("cancelled"), std::string::npos) << out;
  EXPECT_NE(err.find("cancelling job " + job), std::string::npos) << err;
  // The array is gone from the queue, and what its tasks wrote was merged.
  EXPECT_TRUE(Cluster::waitUntil(30, [&] { return shell("squeue --noheader --jobs=" + job + " 2>/dev/null").out.empty(); }));
  std::vector<nlohmann::json> merged = records(m_dir / "merged.jsonl");
  EXPECT_EQ(merged.size(), records(slurm / "records-0.jsonl").size() + records(slurm / "records-1.jsonl").size());
  EXPECT_GE(merged.size(), 1u);
}

TEST_F(SlurmTune, ARerunKeepsWhatAKilledCoordinatorNeverMerged) {
  fs::path slurm = m_dir / "slurm";
  pid_t coordinator = startCoordinator(m_dir, "--trials 5" + common(m_dir));
  bool seen = Cluster::waitUntil(600, [&] {
    return fs::exists(slurm / "records-0.jsonl") && !records(slurm / "records-0.jsonl").empty();
  });
  ASSERT_TRUE(seen) << readFile(m_dir / "err.txt");
  // kill -9: no merge, no scancel. The array is cancelled here, as an operator would.
  ::kill(coordinator, SIGKILL);
  waitFor(coordinator, 30);
  std::string job = jobOf(slurm);
  shell("scancel " + job);
  ASSERT_TRUE(Cluster::waitUntil(60, [&] { return shell("squeue --noheader --jobs=" + job + " 2>/dev/null").out.empty(); }));
  EXPECT_FALSE(fs::exists(m_dir / "merged.jsonl") && !records(m_dir / "merged.jsonl").empty());
  std::vector<nlohmann::json> left = records(slurm / "records-0.jsonl"), left1 = records(slurm / "records-1.jsonl");
  left.insert(left.end(), left1.begin(), left1.end());
  ASSERT_FALSE(left.empty());
  std::vector<int> budgets = shareBudgets(slurm);

  // The rerun keeps every leftover record, measures only the rest, and never a configuration twice.
  Outcome again = kiln("tune " + model() + " --trials 5" + common(m_dir));
  ASSERT_EQ(again.exitCode, 0) << again.out << again.err;
  std::vector<nlohmann::json> merged = records(m_dir / "merged.jsonl");
  std::multiset<std::string> all;
  for (const auto& r : merged) all.insert(r.dump());
  for (const auto& r : left) EXPECT_EQ(all.count(r.dump()), 1u) << r.dump();
  std::set<std::string> configs;
  int search = 0;
  for (const auto& r : merged) {
    if (r["tuner"] == "confirm") continue;
    ++search;
    EXPECT_TRUE(configs.insert(r["key"].dump() + r["knobs"].dump()).second) << r.dump();
  }
  EXPECT_EQ(search, budgets[0] + budgets[1]);
}

TEST_F(SlurmTune, ClearOneLineErrors) {
  // A partition the cluster does not have.
  Outcome o = kiln("tune " + model() + " --trials 2 --partition nosuch" + common(m_dir));
  EXPECT_EQ(o.exitCode, 2) << o.err;
  EXPECT_NE(o.err.find("error: --partition nosuch: no such partition (the cluster has: debug)"), std::string::npos)
      << o.err;
  // sbatch missing: a PATH without Slurm's commands.
  o = kiln("tune " + model() + " --trials 2" + common(m_dir), "PATH=/nonexistent");
  EXPECT_EQ(o.exitCode, 6) << o.err;
  EXPECT_NE(o.err.find("error: sbatch: not found on PATH"), std::string::npos) << o.err;
  // slurmctld unreachable: a configuration whose controller port nobody listens on.
  std::string conf = readFile(g_cluster->conf);
  size_t at = conf.find("SlurmctldPort=");
  size_t end = conf.find('\n', at);
  conf.replace(at, end - at, "SlurmctldPort=" + std::to_string(freePort()));
  writeFile(m_dir / "unreachable.conf", conf);
  o = kiln("tune " + model() + " --trials 2" + common(m_dir), "SLURM_CONF=" + (m_dir / "unreachable.conf").string());
  EXPECT_EQ(o.exitCode, 6) << o.err;
  EXPECT_NE(o.err.find("error: slurmctld: unreachable ("), std::string::npos) << o.err;
  // An array task that fails: the batch script's kiln is one that fails at once. Its log is named.
  o = kiln("tune " + model() + " --trials 2" + common(m_dir), "KILN_WORKER=/bin/false");
  EXPECT_EQ(o.exitCode, 6) << o.out << o.err;
  std::string job = jobOf(m_dir / "slurm");
  EXPECT_NE(o.err.find("error: " + (m_dir / "slurm" / ("slurm-" + job + "_0.out")).string() + ": array task 0 of job " +
                       job + " ended FAILED (exit 1:0)"),
            std::string::npos)
      << o.err;
  // One error line per failed array task (both failed).
  int errors = 0;
  std::istringstream lines(o.err);
  for (std::string line; std::getline(lines, line);) errors += line.starts_with("error: ");
  EXPECT_EQ(errors, 2) << o.err;
  // --partition without --slurm is a usage error.
  o = kiln("tune " + model() + " --partition debug");
  EXPECT_EQ(o.exitCode, 2) << o.err;
}

}  // namespace
