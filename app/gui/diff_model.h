// Two builds side by side per operator (app::diffBuilds) as a table model: each row one operator
// matched by its output values, with both times and the relative change. No widgets.
#pragma once

#include <QAbstractTableModel>

#include "app/measure.h"

namespace kiln::gui {

class BuildDiffModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { Key, OpsA, TimeA, OpsB, TimeB, Change, Note, ColumnCount };
  static constexpr int SortRole = Qt::UserRole + 1;

  using QAbstractTableModel::QAbstractTableModel;
  void setDiff(app::BuildDiff diff);
  const app::BuildDiff& diff() const { return m_diff; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

 private:
  app::BuildDiff m_diff;
};

}  // namespace kiln::gui
