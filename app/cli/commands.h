// The `kiln` subcommands. Each lives in its own cmd_*.cpp and registers itself on the CLI11 app
// with a callback that runs when it was chosen; the callback's return value is the exit code.
// Every command is a thin layer over app/facade.h: parse flags, call the façade, print.
#pragma once

#include <functional>
#include <string>

#include <CLI/CLI.hpp>

#include "app/facade.h"

namespace kiln::cli {

/// The MODEL argument's help.
inline constexpr const char* kModelHelp =
    "model file (.pt, .onnx) or Python reference (my_models.py:build, package.module:build)";

/// Set by the chosen subcommand's callback; main() returns it.
using Action = std::function<int()>;

/// Flags shared by every command that builds a model.
struct BuildFlags {
  std::string target = "llvm";
  int optLevel = 3;
  int threads = 0;
  int64_t batch = 0;
  std::string records;
  bool boundsCheck = false;
  int winograd = 4;
  std::string inputShapes;  // --input-shapes text (app/input_shapes.h)
  bool inputShapesGiven = false;
};
void addBuildFlags(CLI::App* cmd, BuildFlags& flags);
void addBatchFlag(CLI::App* cmd, BuildFlags& flags);
/// --input-shapes "x:[1,3,224,224],ids:[1,128]:int64" (every command that opens a model).
void addInputShapesFlag(CLI::App* cmd, BuildFlags& flags);
/// A malformed --input-shapes fails (usage, returns its exit code); 0 when it is fine or absent.
int checkInputShapes(const BuildFlags& flags);
/// The parsed --input-shapes (empty when not given); call checkInputShapes first.
std::vector<app::InputSpec> inputSpecs(const BuildFlags& flags);
/// The model's open options: --batch and --input-shapes.
app::OpenOptions openOptions(const BuildFlags& flags);
app::BuildOptions buildOptions(const BuildFlags& flags);
/// Checks --input-shapes, then --records before a build: an unusable file fails (returns its exit code); bad lines
/// are skipped, and reported as one warning when `warn` is set. 0 when the build can go on.
int checkBuildFlags(const BuildFlags& flags, bool warn = true);

/// Flags of every command that stores results (--db, --no-store, --session, --new-session).
struct StoreFlags {
  std::string db;
  bool noStore = false;
  int64_t session = 0;
  bool newSession = false;
};
void addStoreFlags(CLI::App* cmd, StoreFlags& flags, bool writes = true);
app::StoreOptions storeOptions(const StoreFlags& flags);

/// Prints "error: <message>" on stderr and returns the exit code of its kind.
int fail(const app::Diagnostic& d);
int fail(const std::string& message, ErrorKind kind);
/// The exit-code table of `kiln --help` (runtime/error.h has the same table).
std::string exitCodeHelp();
/// A CLI11 parse error as one lower-case line that says where to look.
std::string usageMessage(const std::string& cli11Message);

void registerRun(CLI::App& cli, Action& action);
void registerIr(CLI::App& cli, Action& action);
void registerCompare(CLI::App& cli, Action& action);
void registerProfile(CLI::App& cli, Action& action);
void registerRoofline(CLI::App& cli, Action& action);
void registerSweep(CLI::App& cli, Action& action);
void registerSessions(CLI::App& cli, Action& action);
void registerReport(CLI::App& cli, Action& action);
void registerCompile(CLI::App& cli, Action& action);
void registerTune(CLI::App& cli, Action& action);
void registerDoctor(CLI::App& cli, Action& action);
void registerMeasureWorker(CLI::App& cli, Action& action);

}  // namespace kiln::cli
