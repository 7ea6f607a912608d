// `kiln`: the command-line front end. A thin layer over app/facade.h: parses flags, calls the
// façade, prints results, and maps each Diagnostic's kind to a distinct exit code.
#include <cstdio>
#include <fstream>
#include <iostream>

#include <CLI/CLI.hpp>

#include "app/facade.h"
#include "runtime/npy.h"

namespace {

using namespace kiln;

int fail(const app::Diagnostic& d) {
  std::cerr << "error: " << d.message << "\n";
  return static_cast<int>(d.kind);
}

int fail(const std::string& message, ErrorKind kind) { return fail(app::Diagnostic{message, kind}); }

struct CommonFlags {
  std::string target = "llvm";
  int optLevel = 3;
  int threads = 0;
  int64_t batch = 0;
};

void addBuildFlags(CLI::App* cmd, CommonFlags& f) {
  cmd->add_option("--target", f.target, "LLVM-style target: llvm, llvm -mcpu=NAME, llvm -mtriple=T -mcpu=NAME");
  cmd->add_option("-O,--opt-level", f.optLevel, "optimization level 0-3")->check(CLI::Range(0, 3));
  cmd->add_option("--threads", f.threads, "worker threads (default: KILN_NUM_THREADS or all cores)")
      ->check(CLI::NonNegativeNumber);
}

app::BuildOptions buildOptions(const CommonFlags& f) {
  app::BuildOptions b;
  b.target = f.target;
  b.optLevel = f.optLevel;
  b.threads = f.threads;
  return b;
}

int cmdRun(const std::string& modelPath, const std::vector<std::string>& inputPaths,
           const std::vector<std::string>& outputPaths, const CommonFlags& flags) {
  std::vector<runtime::Tensor> inputs;
  for (const auto& p : inputPaths) {
    try {
      inputs.push_back(runtime::readNpy(p));
    } catch (const Error& e) {
      return fail(e.what(), e.kind());
    }
  }
  // Input shapes come from the given arrays; names from the model's metadata when present.
  app::OpenOptions open;
  std::vector<app::InputSpec> declared;
  try {
    declared = importers::readInputSpecs(modelPath);
  } catch (const Error&) {
    // The import below reports unreadable files.
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    app::InputSpec spec;
    spec.name = i < declared.size() ? declared[i].name : "input" + std::to_string(i);
    spec.dtype = inputs[i].dtype();
    spec.shape = inputs[i].shape();
    open.inputs.push_back(spec);
  }
  auto model = app::openModel(modelPath, open);
  if (!model) return fail(model.error());
  auto compiled = app::build(model.value(), buildOptions(flags));
  if (!compiled) return fail(compiled.error());
  auto outputs = app::run(*compiled.value(), inputs);
  if (!outputs) return fail(outputs.error());
  if (!outputPaths.empty() && outputPaths.size() != outputs.value().size())
    return fail("the model has " + std::to_string(outputs.value().size()) + " output(s), got " +
                    std::to_string(outputPaths.size()) + " --output path(s)",
                ErrorKind::Usage);
  for (size_t i = 0; i < outputPaths.size(); ++i) {
    try {
      runtime::writeNpy(outputPaths[i], outputs.value()[i]);
    } catch (const Error& e) {
      return fail(e.what(), e.kind());
    }
  }
  if (outputPaths.empty()) {
    for (size_t i = 0; i < outputs.value().size(); ++i) {
      const auto& t = outputs.value()[i];
      std::cout << "output " << i << ": " << runtime::dtypeName(t.dtype()) << runtime::shapeString(t.shape()) << "\n";
    }
  }
  return 0;
}

int cmdIr(const std::string& modelPath, const std::string& stageName, const CommonFlags& flags) {
  auto stage = app::parseIrStage(stageName);
  if (!stage)
    return fail("unknown stage '" + stageName + "' (expected graph, optimized, lowered, llvm or asm)", ErrorKind::Usage);
  app::OpenOptions open;
  open.batch = flags.batch;
  auto model = app::openModel(modelPath, open);
  if (!model) return fail(model.error());
  auto text = app::irText(model.value(), *stage, buildOptions(flags));
  if (!text) return fail(text.error());
  std::cout << text.value();
  return 0;
}

int cmdCompare(const std::string& modelPath, const CommonFlags& flags, const std::string& jsonPath, int repeat) {
  app::CompareOptions options;
  options.build = buildOptions(flags);
  options.batch = flags.batch;
  options.repeat = repeat;
  auto result = app::compare(modelPath, options);
  if (!result) return fail(result.error());
  const auto& r = result.value();
  std::printf("%s  batch %lld  threads %d  target %s  -O%d\n", r.model.c_str(), static_cast<long long>(r.batch),
              r.threads, r.target.c_str(), r.optLevel);
  std::printf("cpu: %s   torch %s, blas %s   kiln compile %.2f s\n", r.cpu.c_str(), r.torchVersion.c_str(),
              r.blas.c_str(), r.compileSeconds);
  std::printf("%-18s %10s %10s %10s %9s %14s\n", "backend", "median ms", "min ms", "max ms", "samples", "max |diff|");
  for (const auto& b : r.backends) {
    std::printf("%-18s %10.3f %10.3f %10.3f %9zu %14.3g\n", b.backend.c_str(), b.medianMs, b.minMs, b.maxMs,
                b.samplesMs.size(), b.maxAbsDiff);
  }
  std::printf("\n%-18s %6s  %s\n", "backend", "top-1", "first outputs");
  for (const auto& b : r.backends) {
    std::printf("%-18s %6d ", b.backend.c_str(), b.top1);
    for (float v : b.preview) std::printf(" %10.5f", v);
    std::printf("\n");
  }
  if (!jsonPath.empty()) {
    std::ofstream out(jsonPath);
    if (!out) return fail(jsonPath + ": cannot write file", ErrorKind::Io);
    out << app::compareJson(r) << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{"kiln: a deep-learning model compiler for CPUs"};
  cli.require_subcommand(1);
  cli.set_version_flag("--version", "kiln " + app::version());

  CommonFlags flags;
  std::string modelPath, stage = "graph", jsonPath;
  std::vector<std::string> inputs, outputs;
  int repeat = 15;

  CLI::App* run = cli.add_subcommand("run", "compile a model and run it on .npy inputs");
  run->add_option("model", modelPath, "TorchScript model file (.pt)")->required();
  run->add_option("--input,-i", inputs, "input .npy file, in forward-argument order (repeatable)")->required();
  run->add_option("--output,-o", outputs, "output .npy file (repeatable; a returned tuple is flattened)");
  addBuildFlags(run, flags);

  CLI::App* ir = cli.add_subcommand("ir", "print a stage of the compilation");
  ir->add_option("model", modelPath, "TorchScript model file (.pt)")->required();
  ir->add_option("--stage", stage, "graph | optimized | lowered | llvm | asm");
  ir->add_option("--batch", flags.batch, "batch size (replaces dimension 0 of every input)")->check(CLI::PositiveNumber);
  addBuildFlags(ir, flags);

  CLI::App* cmp = cli.add_subcommand("compare", "measure PyTorch eager, compiled PyTorch and Kiln side by side");
  cmp->add_option("model", modelPath, "TorchScript model file (.pt)")->required();
  cmp->add_option("--batch", flags.batch, "batch size")->check(CLI::PositiveNumber);
  cmp->add_option("--json", jsonPath, "write the results as JSON");
  cmp->add_option("--repeat", repeat, "timed repeats per backend")->check(CLI::PositiveNumber);
  addBuildFlags(cmp, flags);

  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return cli.exit(e);
  }
  if (run->parsed()) return cmdRun(modelPath, inputs, outputs, flags);
  if (ir->parsed()) return cmdIr(modelPath, stage, flags);
  if (cmp->parsed()) return cmdCompare(modelPath, flags, jsonPath, repeat);
  return 0;
}
