#include "app/cli/commands.h"

#include <iostream>

namespace kiln::cli {

int fail(const app::Diagnostic& d) {
  std::cerr << "error: " << d.message << "\n";
  return static_cast<int>(d.kind);
}

int fail(const std::string& message, ErrorKind kind) { return fail(app::Diagnostic{message, kind}); }

void addBuildFlags(CLI::App* cmd, BuildFlags& f) {
  cmd->add_option("--target", f.target, "LLVM-style target: llvm, llvm -mcpu=NAME, llvm -mtriple=T -mcpu=NAME");
  cmd->add_option("-O,--opt-level", f.optLevel, "optimization level 0-4 (4: O3 plus fast math)")->check(CLI::Range(0, 4));
  cmd->add_option("--threads", f.threads, "worker threads (default: KILN_NUM_THREADS or all cores)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--records", f.records, "tuning records (JSON lines from kiln tune, or 'store' / a .db session store): use the best schedule per workload");
}

void addBatchFlag(CLI::App* cmd, BuildFlags& f) {
  cmd->add_option("--batch", f.batch, "batch size (replaces dimension 0 of every input)")->check(CLI::PositiveNumber);
}

app::BuildOptions buildOptions(const BuildFlags& f) {
  app::BuildOptions b;
  b.target = f.target;
  b.optLevel = f.optLevel;
  b.threads = f.threads;
  b.records = f.records;
  return b;
}

}  // namespace kiln::cli
