// The per-operator profile as a table model: one row per call of the compiled graph (or per
// operator kind when grouped). Display text is formatted; SortRole holds the raw number so a
// QSortFilterProxyModel sorts 9.5 µs below 10 µs. No widgets.
#pragma once

#include <QAbstractTableModel>
#include <QSortFilterProxyModel>

#include "profiler/records.h"

namespace kiln::gui {

class ProfileTableModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { Index, Operators, Time, Share, Gflops, Flops, Bytes, OutputShape, Calls, Kernel, ColumnCount };
  static constexpr int SortRole = Qt::UserRole + 1;
  static constexpr int CallRole = Qt::UserRole + 2;  // the call index, for selection sync

  using QAbstractTableModel::QAbstractTableModel;

  void setOps(std::vector<profiler::OpRecord> ops);
  void clear() { setOps({}); }
  const std::vector<profiler::OpRecord>& ops() const { return m_ops; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

 private:
  std::vector<profiler::OpRecord> m_ops;
  double m_maxTimeUs = 0;
};

/// Sorts by SortRole and filters on the operator, kernel and shape columns (case-insensitive
/// substring), plus an optional minimum share of the total.
class ProfileFilterModel : public QSortFilterProxyModel {
  Q_OBJECT
 public:
  explicit ProfileFilterModel(QObject* parent = nullptr);
  void setMinimumShare(double percent);

 protected:
  bool filterAcceptsRow(int sourceRow, const QModelIndex& sourceParent) const override;

 private:
  double m_minShare = 0;
};

}  // namespace kiln::gui
