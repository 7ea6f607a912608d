// kiln run MODEL --input IN.npy [--input ...] --output OUT.npy [--output ...] [-O] [--target]
// MODEL may also be a module directory from `kiln compile`: it then runs with the runtime alone.
#include <filesystem>
#include <iostream>

#include "app/cli/commands.h"
#include "importers/torch_export.h"
#include "runtime/npy.h"

namespace kiln::cli {
namespace {

struct RunArgs {
  std::string model;
  std::vector<std::string> inputs, outputs;
  BuildFlags flags;
};

int writeOutputs(const RunArgs& a, const std::vector<runtime::Tensor>& outputs);

std::string describe(const app::InputSpec& spec, size_t index) {
  return "input " + std::to_string(index) + (spec.name.empty() ? "" : " (" + spec.name + ")");
}

/// Count and dtypes against the model's declared inputs (kiln.json), before anything is built.
int checkInputs(const RunArgs& a, const std::vector<runtime::Tensor>& inputs, const std::vector<app::InputSpec>& declared,
                bool shapesToo = false) {
  if (declared.empty()) return 0;
  if (inputs.size() != declared.size()) {
    std::string names;
    for (const auto& d : declared) names += (names.empty() ? "" : ", ") + d.name;
    return fail(a.model + ": the model takes " + std::to_string(declared.size()) + " input(s) (" + names + "), got " +
                    std::to_string(inputs.size()) + " --input file(s)",
                ErrorKind::InvalidInput);
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (shapesToo && (inputs[i].dtype() != declared[i].dtype || inputs[i].shape() != declared[i].shape))
      return fail(a.inputs[i] + ": " + describe(declared[i], i) + " is " + std::string(runtime::dtypeName(inputs[i].dtype())) +
                      runtime::shapeString(inputs[i].shape()) + ", --input-shapes says " +
                      std::string(runtime::dtypeName(declared[i].dtype)) + runtime::shapeString(declared[i].shape),
                  ErrorKind::InvalidInput);
    if (inputs[i].dtype() != declared[i].dtype)
      return fail(a.inputs[i] + ": " + describe(declared[i], i) + " is " + std::string(runtime::dtypeName(inputs[i].dtype())) +
                      runtime::shapeString(inputs[i].shape()) + ", the model expects " +
                      std::string(runtime::dtypeName(declared[i].dtype)) + runtime::shapeString(declared[i].shape),
                  ErrorKind::InvalidInput);
  }
  return 0;
}

/// A model re-imported for the inputs' shapes failed: when a shape differs from the declared one,
/// the input is the likely culprit, so the error names it (the model's own message follows).
int failWithShapes(const app::Diagnostic& d, const RunArgs& a, const std::vector<runtime::Tensor>& inputs,
                   const std::vector<app::InputSpec>& declared) {
  if (d.kind != ErrorKind::InvalidModel && d.kind != ErrorKind::InvalidInput) return fail(d);
  for (size_t i = 0; i < inputs.size() && i < declared.size(); ++i) {
    if (inputs[i].shape() == declared[i].shape) continue;
    return fail(a.inputs[i] + ": " + describe(declared[i], i) + " has shape " + runtime::shapeString(inputs[i].shape()) +
                    ", the model was exported for " + runtime::shapeString(declared[i].shape) +
                    " and does not compile for it: " + d.message,
                ErrorKind::InvalidInput);
  }
  return fail(d);
}

int runCommand(const RunArgs& a) {
  if (int rc = checkBuildFlags(a.flags)) return rc;
  std::vector<runtime::Tensor> inputs;
  for (const auto& p : a.inputs) {
    try {
      inputs.push_back(runtime::readNpy(p));
    } catch (const Error& e) {
      return fail(e.what(), e.kind());
    }
  }
  if (std::filesystem::is_directory(a.model)) {
    auto module = app::loadModule(a.model, a.flags.threads);
    if (!module) return fail(module.error());
    auto outputs = app::runModule(*module.value(), inputs);
    if (!outputs) return fail(outputs.error());
    return writeOutputs(a, outputs.value());
  }
  // --input-shapes, when given, must agree with the arrays.
  if (std::vector<app::InputSpec> given = inputSpecs(a.flags); !given.empty()) {
    app::OpenOptions open;
    open.inputs = given;
    auto model = app::openModel(a.model, open);
    if (!model) return fail(model.error());
    if (int rc = checkInputs(a, inputs, model.value()->inputs, true)) return rc;
    auto compiled = app::build(model.value(), buildOptions(a.flags));
    if (!compiled) return fail(compiled.error());
    auto outputs = app::run(*compiled.value(), inputs);
    if (!outputs) return fail(outputs.error());
    return writeOutputs(a, outputs.value());
  }
  // Input shapes come from the given arrays; names from the model's metadata when present.
  app::OpenOptions open;
  std::vector<app::InputSpec> declared;
  try {
    if (app::parsePythonReference(a.model) || importers::isTorchExportFile(a.model)) {
      if (auto sig = app::modelSignature(a.model)) declared = sig->recorded;
    } else {
      declared = importers::readInputSpecs(a.model);
    }
  } catch (const Error&) {
    // The import below reports unreadable files.
  }
  if (int rc = checkInputs(a, inputs, declared)) return rc;
  for (size_t i = 0; i < inputs.size(); ++i) {
    app::InputSpec spec;
    spec.name = i < declared.size() ? declared[i].name : "";  // by position
    spec.dtype = inputs[i].dtype();
    spec.shape = inputs[i].shape();
    open.inputs.push_back(spec);
  }
  auto model = app::openModel(a.model, open);
  if (!model) return failWithShapes(model.error(), a, inputs, declared);
  auto compiled = app::build(model.value(), buildOptions(a.flags));
  if (!compiled) return failWithShapes(compiled.error(), a, inputs, declared);
  auto outputs = app::run(*compiled.value(), inputs);
  if (!outputs) return fail(outputs.error());
  return writeOutputs(a, outputs.value());
}

int writeOutputs(const RunArgs& a, const std::vector<runtime::Tensor>& outputs) {
  if (!a.outputs.empty() && a.outputs.size() != outputs.size())
    return fail("the model has " + std::to_string(outputs.size()) + " output(s), got " +
                    std::to_string(a.outputs.size()) + " --output path(s)",
                ErrorKind::Usage);
  for (size_t i = 0; i < a.outputs.size(); ++i) {
    try {
      runtime::writeNpy(a.outputs[i], outputs[i]);
    } catch (const Error& e) {
      return fail(e.what(), e.kind());
    }
  }
  if (a.outputs.empty()) {
    for (size_t i = 0; i < outputs.size(); ++i) {
      const auto& t = outputs[i];
      std::cout << "output " << i << ": " << runtime::dtypeName(t.dtype()) << runtime::shapeString(t.shape()) << "\n";
    }
  }
  return 0;
}

}  // namespace

void registerRun(CLI::App& cli, Action& action) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = cli.add_subcommand("run", "compile a model and run it on .npy inputs");
  cmd->add_option("model", args->model, std::string(kModelHelp) + ", or a module directory from `kiln compile`")->required();
  cmd->add_option("--input,-i", args->inputs, "input .npy file, in forward-argument order (repeatable)")->required();
  cmd->add_option("--output,-o", args->outputs, "output .npy file (repeatable; a returned tuple is flattened)");
  addBuildFlags(cmd, args->flags);
  addInputShapesFlag(cmd, args->flags);
  cmd->callback([args, &action] { action = [args] { return runCommand(*args); }; });
}

}  // namespace kiln::cli
