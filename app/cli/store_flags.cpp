// The session-store flags shared by compare, profile, sweep, sessions and report.
#include "app/cli/commands.h"

namespace kiln::cli {

void addStoreFlags(CLI::App* cmd, StoreFlags& f, bool writes) {
  cmd->add_option("--db", f.db, "session store (default: $XDG_DATA_HOME/kiln/kiln.db)");
  if (!writes) return;
  cmd->add_flag("--no-store", f.noStore, "do not keep the results in the session store");
  auto* session =
      cmd->add_option("--session", f.session, "append to this session (default: the model's latest)")
          ->check(CLI::PositiveNumber);
  cmd->add_flag("--new-session", f.newSession, "start a new session for the model")->excludes(session);
}

app::StoreOptions storeOptions(const StoreFlags& f) {
  app::StoreOptions s;
  s.enabled = !f.noStore;
  s.dbPath = f.db;
  s.session = f.newSession ? -1 : f.session;
  return s;
}

}  // namespace kiln::cli
