// A thin client of a Slurm cluster through its own commands (sbatch, scontrol, scancel, sinfo,
// sacct: Debian's slurm-client, part of slurm-wlm), for `kiln tune --slurm` (slurm_tune.cpp).
// Kiln links no Slurm library: the commands read $SLURM_CONF (else /etc/slurm/slurm.conf) and
// authenticate through munge as they do for a user at a shell. Every failure is one kiln::Error
// line: the command missing, slurmctld unreachable, an unknown partition, a refused submission.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace kiln::app {

/// The full path of a program on PATH, "" when there is none.
std::string findOnPath(const std::string& program);

/// Checks that sbatch is installed (else ErrorKind::Io "sbatch: not found on PATH ..."),
/// that slurmctld answers (else Io "slurmctld: unreachable (...)") and, when `partition` is not
/// empty, that the cluster has it (else Usage, listing the partitions it has). Throws kiln::Error.
void checkSlurm(const std::string& partition);

struct ArraySubmission {
  std::string script;     // the batch script (an executable file)
  std::string jobName;
  int arraySize = 1;      // tasks 0 .. arraySize-1
  std::string output;     // --output pattern (%A the job, %a the array index)
  std::string chdir;      // the tasks' working directory
  std::string partition;  // "": the default one
  int cpusPerTask = 0;    // 0: Slurm's default
};
/// sbatch --parsable --array=0-(N-1) ...; returns the job id. Throws kiln::Error (Io, or Usage for
/// a partition sbatch refuses) with sbatch's own reason.
std::string submitArray(const ArraySubmission& submission);

/// One array task as slurmctld reports it (scontrol show job).
struct ArrayTaskStatus {
  std::string state;     // PENDING, RUNNING, COMPLETING, COMPLETED, FAILED, CANCELLED, ...
  std::string exitCode;  // "exit:signal"
  std::string log;       // StdOut
};
/// The tasks of array job `jobId` by index. `known` is false when slurmctld no longer knows the
/// job (purged after MinJobAge): the caller falls back on what the tasks left behind. An index
/// cancelled while it was still pending has no entry.
std::map<int, ArrayTaskStatus> arrayTaskStatuses(const std::string& jobId, bool& known);
/// Final states from Slurm's accounting (sacct), when the cluster keeps it; empty otherwise.
std::map<int, ArrayTaskStatus> accountedArrayTasks(const std::string& jobId);

/// True for a state a task does not leave (COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL, ...).
bool isFinalJobState(const std::string& state);

/// scancel JOB (the whole array) or JOB_INDEX (one task). Best effort: false when scancel failed.
bool cancelJob(const std::string& jobId);

/// `text` quoted for a POSIX shell ('...').
std::string shellQuote(const std::string& text);

}  // namespace kiln::app
