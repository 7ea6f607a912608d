// The session browser (a dock) and the Sessions diff view (a tab). The browser lists the store's
// sessions and their runs (SessionTreeModel); a double-click reopens a run's result, and two
// selected builds with profiles can be diffed per operator (app::diffBuilds → BuildDiffModel).
#pragma once

#include <QLabel>
#include <QPushButton>
#include <QTableView>
#include <QTreeView>
#include <QWidget>

#include "app/gui/diff_model.h"
#include "app/gui/session_model.h"

namespace kiln::gui {

class SessionBrowser : public QWidget {
  Q_OBJECT
 public:
  explicit SessionBrowser(QWidget* parent = nullptr);
  SessionTreeModel* model() const { return m_model; }
  QTreeView* tree() const { return m_tree; }
  void setSessions(std::vector<profiler::SessionData> sessions, const QString& dbPath);
  void setError(const QString& message);
  /// Build ids of the selected runs that have a profile (in selection order).
  std::vector<int64_t> selectedProfiledBuilds() const;
  /// The session of the current row, 0 when none.
  int64_t currentSession() const;
  /// Selects the runs of the given builds (tests, screenshots).
  void selectBuilds(const std::vector<int64_t>& buildIds);

 signals:
  void refreshRequested();
  void openRunRequested(int64_t sessionId, int64_t runId);
  void diffRequested(int64_t buildA, int64_t buildB);
  void reportRequested(int64_t sessionId);

 private:
  void updateButtons();

  SessionTreeModel* m_model;
  QTreeView* m_tree;
  QLabel* m_status;
  QPushButton* m_open;
  QPushButton* m_diff;
  QPushButton* m_report;
};

class SessionDiffView : public QWidget {
  Q_OBJECT
 public:
  explicit SessionDiffView(QWidget* parent = nullptr);
  void setDiff(const app::BuildDiff& diff);
  void clear(const QString& message);
  BuildDiffModel* model() const { return m_model; }

 private:
  QLabel* m_header;
  QTableView* m_table;
  BuildDiffModel* m_model;
};

}  // namespace kiln::gui
