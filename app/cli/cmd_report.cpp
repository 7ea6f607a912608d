// kiln report SESSION [--html FILE] [--csv FILE] [--top N] [--db FILE]
#include <cstdio>
#include <fstream>

#include "app/cli/commands.h"

namespace kiln::cli {
namespace {

struct ReportArgs {
  int64_t session = 0;
  std::string html, csv;
  int top = 15;
  StoreFlags store;
};

int write(int64_t session, const std::string& path, app::ReportFormat format, const ReportArgs& a) {
  auto text = app::sessionReport(a.store.db, session, format, a.top);
  if (!text) return fail(text.error());
  std::ofstream out(path);
  if (!out || !(out << text.value())) return fail(path + ": cannot write file", ErrorKind::Io);
  std::printf("wrote %s\n", path.c_str());
  return 0;
}

int reportCommand(const ReportArgs& a) {
  if (a.html.empty() && a.csv.empty())
    return fail("nothing to write: give --html FILE and/or --csv FILE", ErrorKind::Usage);
  if (!a.html.empty())
    if (int rc = write(a.session, a.html, app::ReportFormat::Html, a)) return rc;
  if (!a.csv.empty())
    if (int rc = write(a.session, a.csv, app::ReportFormat::Csv, a)) return rc;
  return 0;
}

}  // namespace

void registerReport(CLI::App& cli, Action& action) {
  auto args = std::make_shared<ReportArgs>();
  CLI::App* cmd = cli.add_subcommand("report", "write a session as a self-contained HTML page or CSV");
  cmd->add_option("session", args->session, "session id (kiln sessions list)")->required();
  cmd->add_option("--html", args->html, "HTML with inline SVG charts");
  cmd->add_option("--csv", args->csv, "one row per measurement, fixed columns");
  cmd->add_option("--top", args->top, "operators in the profile chart")->check(CLI::PositiveNumber);
  addStoreFlags(cmd, args->store, false);
  cmd->callback([args, &action] { action = [args] { return reportCommand(*args); }; });
}

}  // namespace kiln::cli
