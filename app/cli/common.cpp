#include "app/cli/commands.h"

#include "app/tune.h"

#include <cctype>
#include <iostream>

namespace kiln::cli {

int fail(const app::Diagnostic& d) {
  std::cerr << "error: " << d.message << "\n";
  return static_cast<int>(d.kind);
}

int fail(const std::string& message, ErrorKind kind) { return fail(app::Diagnostic{message, kind}); }

int checkBuildFlags(const BuildFlags& f, bool warn) {
  if (int rc = checkInputShapes(f)) return rc;
  auto check = app::checkRecords(f.records);
  if (!check) return fail(check.error());
  if (warn && check->badLines > 0)
    std::cerr << "warning: " << f.records << ": skipped " << check->badLines << " bad line(s) ("
              << check->firstProblem << "); using " << check->records << " record(s)\n";
  return 0;
}

std::string exitCodeHelp() {
  return "Errors are one line on stderr, \"error: FILE: PROBLEM\", with an exit code by kind (the same for every\n"
         "subcommand, and the C API's status codes):\n"
         "   0 success                      6 a file cannot be read or written\n"
         "   2 usage: bad flags/arguments   7 generated code crashed or hung (isolated worker)\n"
         "   3 not a model / corrupt file   8 unknown target, CPU or feature\n"
         "   4 unsupported operator or      9 exported module of another version or machine:\n"
         "     construct (shapes by data)     recompile it\n"
         "   5 bad inputs (count, shape,   10 session store: not a Kiln database, corrupt, or\n"
         "     dtype, .npy, records file)     newer than this Kiln (left untouched)\n"
         "                                 70 internal error (a bug in Kiln)";
}

std::string usageMessage(const std::string& cli11Message) {
  std::string m = cli11Message;
  while (!m.empty() && (m.back() == '\n' || m.back() == '.' || m.back() == ' ')) m.pop_back();
  for (char& c : m) if (c == '\n') c = ' ';
  // CLI11 starts some messages with a capital ("The following argument was not expected").
  if (m.size() > 1 && std::isupper(static_cast<unsigned char>(m[0])) &&
      (std::islower(static_cast<unsigned char>(m[1])) || m[1] == ' '))
    m[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(m[0])));
  return m + " (see --help)";
}

void addBuildFlags(CLI::App* cmd, BuildFlags& f) {
  cmd->add_option("--target", f.target, "LLVM-style target: llvm, llvm -mcpu=NAME, llvm -mtriple=T -mcpu=NAME");
  cmd->add_option("-O,--opt-level", f.optLevel, "optimization level 0-4 (4: O3 plus fast math)")->check(CLI::Range(0, 4));
  cmd->add_option("--threads", f.threads, "worker threads (default: KILN_NUM_THREADS or all cores)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--records", f.records, "tuning records (JSON lines from kiln tune, or 'store' / a .db session store): use the best schedule per workload");
  cmd->add_flag("--bounds-check", f.boundsCheck,
                "check each kernel load/store index the loop ranges do not prove in bounds (debug; also KILN_BOUNDS_CHECK=1)");
  cmd->add_option("--winograd", f.winograd,
                  "largest Winograd tile of 3x3 convolutions at -O3: 4 (fastest), 2 (less rounding) or 0 (none)")
      ->check(CLI::IsMember({0, 2, 4}));
}

void addBatchFlag(CLI::App* cmd, BuildFlags& f) {
  cmd->add_option("--batch", f.batch, "batch size (replaces dimension 0 of every input)")->check(CLI::PositiveNumber);
}

void addInputShapesFlag(CLI::App* cmd, BuildFlags& f) {
  cmd->add_option("--input-shapes", f.inputShapes,
                  "input names, shapes and dtypes, e.g. \"x:[1,3,224,224],ids:[1,128]:int64\" (float32 by default; "
                  "without names: in forward order); needed for a file that records none")
      ->each([&f](const std::string&) { f.inputShapesGiven = true; });
}

int checkInputShapes(const BuildFlags& f) {
  if (!f.inputShapesGiven && f.inputShapes.empty()) return 0;
  auto specs = app::parseInputShapes(f.inputShapes);
  return specs ? 0 : fail(specs.error());
}

std::vector<app::InputSpec> inputSpecs(const BuildFlags& f) {
  if (f.inputShapes.empty()) return {};
  auto specs = app::parseInputShapes(f.inputShapes);
  return specs ? specs.value() : std::vector<app::InputSpec>{};
}

app::OpenOptions openOptions(const BuildFlags& f) {
  app::OpenOptions open;
  open.batch = f.batch;
  open.inputs = inputSpecs(f);
  return open;
}

app::BuildOptions buildOptions(const BuildFlags& f) {
  app::BuildOptions b;
  b.target = f.target;
  b.optLevel = f.optLevel;
  b.threads = f.threads;
  b.records = f.records;
  b.boundsCheck = f.boundsCheck;
  b.winograd = f.winograd;
  return b;
}

}  // namespace kiln::cli
