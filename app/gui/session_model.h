// The session store as a two-level tree: sessions (one model each), and under each the runs kept
// in it (compare, profile, sweep) with the build they measured. Filled from app::listSessions /
// app::loadSession on a worker; the views reopen a run's result or diff two builds from the ids
// in the roles below. No widgets.
#pragma once

#include <QAbstractItemModel>

#include <vector>

#include "profiler/store.h"

namespace kiln::gui {

class SessionTreeModel : public QAbstractItemModel {
  Q_OBJECT
 public:
  enum Column { Name, When, Details, Result, ColumnCount };
  static constexpr int SessionIdRole = Qt::UserRole + 1;
  static constexpr int RunIdRole = Qt::UserRole + 2;    // 0 on session rows
  static constexpr int BuildIdRole = Qt::UserRole + 3;  // 0 when the run has no Kiln build
  static constexpr int KindRole = Qt::UserRole + 4;     // "session", "compare", "profile", "sweep"
  static constexpr int HasProfileRole = Qt::UserRole + 5;

  using QAbstractItemModel::QAbstractItemModel;

  /// Newest session first (as listed); runs newest first inside each.
  void setSessions(std::vector<profiler::SessionData> sessions);
  const std::vector<profiler::SessionData>& sessions() const { return m_sessions; }
  const profiler::SessionData* session(int64_t id) const;

  QModelIndex index(int row, int column, const QModelIndex& parent = {}) const override;
  QModelIndex parent(const QModelIndex& child) const override;
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

 private:
  QVariant sessionData(const profiler::SessionData& s, int column, int role) const;
  QVariant runData(const profiler::SessionData& s, const profiler::StoredRun& run, int column, int role) const;

  std::vector<profiler::SessionData> m_sessions;
};

}  // namespace kiln::gui
