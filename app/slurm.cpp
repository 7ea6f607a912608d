// The Slurm client of app/slurm.h: its commands run as child processes (profiler/subprocess.h)
// and their output is parsed here; nothing else in Kiln talks to Slurm.
#include "app/slurm.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "profiler/subprocess.h"
#include "runtime/error.h"

namespace kiln::app {

namespace fs = std::filesystem;

namespace {

/// Slurm's commands answer within seconds; a controller that does not is reported as unreachable.
constexpr double kCommandSeconds = 60;

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  size_t start = s.find_first_not_of(" \n");
  return start == std::string::npos ? "" : s.substr(start);
}

/// The most telling line of a Slurm command's stderr: the last one, without the command's
/// "sbatch: error: " prefix.
std::string reasonOf(const profiler::ProcessResult& r) {
  if (r.timedOut) return "no answer within " + std::to_string(static_cast<int>(kCommandSeconds)) + " s";
  if (!r.started) return r.error;
  std::istringstream in(r.err.empty() ? r.out : r.err);
  std::string line, last;
  while (std::getline(in, line))
    if (!trim(line).empty()) last = trim(line);
  for (const char* prefix : {"sbatch: error: ", "scontrol: error: ", "sinfo: error: ", "scancel: error: ", "error: "})
    if (last.starts_with(prefix)) last = last.substr(std::char_traits<char>::length(prefix));
  if (last.empty()) return "exit code " + std::to_string(r.exitCode);
  return last;
}

bool unreachable(const std::string& reason) {
  return reason.find("Unable to contact slurm controller") != std::string::npos ||
         reason.find("Could not establish a configuration source") != std::string::npos ||
         reason.find("no answer within") != std::string::npos;
}

/// "key=value key=value ..." of `scontrol -o show job` as a map (values have no spaces, except
/// a few fields Kiln does not read).
std::map<std::string, std::string> fieldsOf(const std::string& line) {
  std::map<std::string, std::string> out;
  std::istringstream in(line);
  std::string word;
  while (in >> word) {
    size_t eq = word.find('=');
    if (eq != std::string::npos) out.emplace(word.substr(0, eq), word.substr(eq + 1));
  }
  return out;
}

/// "0-3,5,7-9%2" as the indices it lists.
std::vector<int> indicesOf(std::string spec) {
  std::vector<int> out;
  if (size_t pct = spec.find('%'); pct != std::string::npos) spec.resize(pct);
  std::istringstream in(spec);
  std::string part;
  while (std::getline(in, part, ',')) {
    if (part.empty()) continue;
    size_t dash = part.find('-');
    char* end = nullptr;
    long first = std::strtol(part.c_str(), &end, 10);
    long last = dash == std::string::npos ? first : std::strtol(part.c_str() + dash + 1, &end, 10);
    size_t colon = part.find(':');  // "0-9:2": a step
    long step = colon == std::string::npos ? 1 : std::max(1L, std::strtol(part.c_str() + colon + 1, &end, 10));
    for (long i = first; i <= last && i - first < 1000000; i += step) out.push_back(static_cast<int>(i));
  }
  return out;
}

}  // namespace

std::string findOnPath(const std::string& program) {
  if (program.find('/') != std::string::npos) return ::access(program.c_str(), X_OK) == 0 ? program : "";
  const char* path = std::getenv("PATH");
  std::istringstream in(path ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(in, dir, ':')) {
    if (dir.empty()) continue;
    fs::path candidate = fs::path(dir) / program;
    std::error_code ec;
    if (fs::is_regular_file(candidate, ec) && ::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return "";
}

void checkSlurm(const std::string& partition) {
  for (const char* program : {"sbatch", "scontrol", "scancel", "sinfo"})
    if (findOnPath(program).empty())
      throw Error(std::string(program) + ": not found on PATH (install Slurm's client commands: Debian's slurm-client, "
                                         "part of slurm-wlm)",
                  ErrorKind::Io);
  // sinfo asks slurmctld: its answer proves the controller is up and lists the partitions.
  profiler::ProcessResult r = profiler::runProcess({"sinfo", "--noheader", "--format=%R"}, kCommandSeconds);
  if (r.exitCode != 0) {
    std::string reason = reasonOf(r);
    if (reason.find("configuration file") != std::string::npos) {
      const char* conf = std::getenv("SLURM_CONF");
      throw Error(std::string(conf && *conf ? conf : "/etc/slurm/slurm.conf") + ": not a usable Slurm configuration (" +
                      reason + ")",
                  ErrorKind::Io);
    }
    throw Error("slurmctld: unreachable (" + reason + ")", ErrorKind::Io);
  }
  if (partition.empty()) return;
  std::istringstream in(r.out);
  std::string name, names;
  while (std::getline(in, name)) {
    name = trim(name);
    if (name.empty()) continue;
    if (name == partition) return;
    names += (names.empty() ? "" : ", ") + name;
  }
  throw Error("--partition " + partition + ": no such partition (the cluster has: " +
                  (names.empty() ? "none" : names) + ")",
              ErrorKind::Usage);
}

std::string submitArray(const ArraySubmission& s) {
  std::vector<std::string> argv{"sbatch", "--parsable", "--array=0-" + std::to_string(std::max(1, s.arraySize) - 1),
                                "--job-name=" + s.jobName, "--output=" + s.output};
  if (!s.chdir.empty()) argv.push_back("--chdir=" + s.chdir);
  if (!s.partition.empty()) argv.push_back("--partition=" + s.partition);
  if (s.cpusPerTask > 0) argv.push_back("--cpus-per-task=" + std::to_string(s.cpusPerTask));
  argv.push_back(s.script);
  profiler::ProcessResult r = profiler::runProcess(argv, kCommandSeconds);
  if (!r.started) throw Error("sbatch: cannot run (" + r.error + ")", ErrorKind::Io);
  std::string reason = reasonOf(r);
  if (r.exitCode != 0) {
    if (unreachable(reason)) throw Error("slurmctld: unreachable (" + reason + ")", ErrorKind::Io);
    if (reason.find("partition") != std::string::npos)
      throw Error("--partition " + (s.partition.empty() ? std::string("(default)") : s.partition) + ": " + reason,
                  ErrorKind::Usage);
    throw Error("sbatch: the job array was refused (" + reason + ")", ErrorKind::Io);
  }
  // "123" or "123;cluster"
  std::string id = trim(r.out);
  if (size_t semi = id.find(';'); semi != std::string::npos) id.resize(semi);
  if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos)
    throw Error("sbatch: unexpected answer '" + trim(r.out) + "'", ErrorKind::Io);
  return id;
}

std::map<int, ArrayTaskStatus> arrayTaskStatuses(const std::string& jobId, bool& known) {
  std::map<int, ArrayTaskStatus> out;
  profiler::ProcessResult r = profiler::runProcess({"scontrol", "--oneliner", "show", "job", jobId}, kCommandSeconds);
  if (r.exitCode != 0) {
    std::string reason = reasonOf(r);
    // Purged after MinJobAge: the caller reads what the tasks left behind.
    if (reason.find("Invalid job id") != std::string::npos) {
      known = false;
      return out;
    }
    if (unreachable(reason)) throw Error("slurmctld: unreachable (" + reason + ")", ErrorKind::Io);
    throw Error("scontrol show job " + jobId + ": " + reason, ErrorKind::Io);
  }
  known = true;
  std::istringstream in(r.out);
  std::string line;
  while (std::getline(in, line)) {
    std::map<std::string, std::string> f = fieldsOf(line);
    if (f["ArrayJobId"] != jobId && f["JobId"] != jobId) continue;
    auto task = f.find("ArrayTaskId");
    if (task == f.end()) continue;
    ArrayTaskStatus status{f["JobState"], f["ExitCode"], f["StdOut"]};
    // Pending tasks share one record: "ArrayTaskId=1-3", the log pattern not yet expanded.
    for (int index : indicesOf(task->second)) out[index] = status;
  }
  return out;
}

std::map<int, ArrayTaskStatus> accountedArrayTasks(const std::string& jobId) {
  std::map<int, ArrayTaskStatus> out;
  if (findOnPath("sacct").empty()) return out;
  profiler::ProcessResult r = profiler::runProcess(
      {"sacct", "--noheader", "--parsable2", "--jobs=" + jobId, "--format=JobID,State,ExitCode"}, kCommandSeconds);
  if (r.exitCode != 0) return out;  // "Slurm accounting storage is disabled"
  std::istringstream in(r.out);
  std::string line;
  while (std::getline(in, line)) {
    // 123_4|CANCELLED by 0|0:15 ; steps (123_4.batch) are skipped
    std::vector<std::string> cols;
    std::istringstream fields(line);
    std::string col;
    while (std::getline(fields, col, '|')) cols.push_back(col);
    if (cols.size() < 3 || !cols[0].starts_with(jobId + "_") || cols[0].find('.') != std::string::npos) continue;
    std::string index = cols[0].substr(jobId.size() + 1);
    if (index.empty() || index.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string state = cols[1].substr(0, cols[1].find(' '));
    out[std::stoi(index)] = {state, cols[2], ""};
  }
  return out;
}

bool isFinalJobState(const std::string& state) {
  static const char* const kFinal[] = {"COMPLETED", "FAILED",    "CANCELLED", "TIMEOUT",     "NODE_FAIL",
                                       "PREEMPTED", "BOOT_FAIL", "DEADLINE",  "OUT_OF_MEMORY", "REVOKED",
                                       "SPECIAL_EXIT"};
  return std::any_of(std::begin(kFinal), std::end(kFinal), [&](const char* s) { return state == s; });
}

bool cancelJob(const std::string& jobId) {
  profiler::ProcessResult r = profiler::runProcess({"scancel", jobId}, kCommandSeconds);
  return r.exitCode == 0;
}

std::string shellQuote(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

}  // namespace kiln::app
