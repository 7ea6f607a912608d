// kiln doctor MODEL [--json [FILE]] [--all] [--batch N] | kiln doctor --list-ops [--markdown]
#include <fstream>
#include <iostream>

#include "app/cli/commands.h"
#include "app/doctor.h"

namespace kiln::cli {
namespace {

struct DoctorArgs {
  std::string model;
  BuildFlags flags;
  bool json = false;
  std::string jsonFile;
  bool all = false;
  bool listOps = false;
  bool markdown = false;
};

int listOps(bool markdown) {
  app::SupportedOps ops = app::supportedOps();
  if (markdown) {
    std::cout << app::supportedOpsMarkdown(ops);
    return 0;
  }
  for (const auto& [name, summary] : ops.kilnOps) std::cout << name << "\t" << summary << "\n";
  std::cout << "\n";
  for (const std::string& kind : ops.torchScriptOps) std::cout << kind << "\n";
  std::cout << "\n";
  for (const std::string& op : ops.onnxOps) std::cout << "onnx::" << op << "\n";
  return 0;
}

int doctorCommand(const DoctorArgs& a) {
  if (a.listOps) return listOps(a.markdown);
  if (a.model.empty()) return fail("a model is required", ErrorKind::Usage);
  if (int rc = checkInputShapes(a.flags)) return rc;
  app::OpenOptions open = openOptions(a.flags);
  auto report = app::diagnoseModel(a.model, open);
  if (!report) return fail(report.error());
  if (!a.jsonFile.empty()) {
    std::ofstream out(a.jsonFile);
    if (!out || !(out << app::doctorJson(report.value())))
      return fail("cannot write " + a.jsonFile, ErrorKind::Io);
  }
  if (a.json && a.jsonFile.empty()) std::cout << app::doctorJson(report.value());
  else std::cout << app::doctorText(report.value(), a.all);
  // The report is the product: an unsupported model is not an error of the command.
  return 0;
}

}  // namespace

void registerDoctor(CLI::App& cli, Action& action) {
  auto args = std::make_shared<DoctorArgs>();
  CLI::App* cmd = cli.add_subcommand("doctor", "list what Kiln can compile in a model: every operator, the "
                                               "share of FLOPs compiled, hints");
  cmd->add_option("model", args->model, kModelHelp);
  addBatchFlag(cmd, args->flags);
  addInputShapesFlag(cmd, args->flags);
  cmd->add_flag("--json", args->json, "print the report as JSON");
  cmd->add_option("--json-file", args->jsonFile, "also write the JSON report to FILE");
  cmd->add_flag("--all", args->all, "list every operator node, not only the table by kind");
  cmd->add_flag("--list-ops", args->listOps, "print the supported operators (Kiln's and the importer's aten:: kinds)");
  cmd->add_flag("--markdown", args->markdown, "with --list-ops: as Markdown for the README");
  cmd->callback([args, &action] { action = [args] { return doctorCommand(*args); }; });
}

}  // namespace kiln::cli
