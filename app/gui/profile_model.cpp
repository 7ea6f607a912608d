#include "app/gui/profile_model.h"

#include <QColor>
#include <QFont>

#include <algorithm>

#include "app/gui/format.h"

namespace kiln::gui {

void ProfileTableModel::setOps(std::vector<profiler::OpRecord> ops) {
  beginResetModel();
  m_ops = std::move(ops);
  m_maxTimeUs = 0;
  for (const auto& op : m_ops) m_maxTimeUs = std::max(m_maxTimeUs, op.timeUs);
  endResetModel();
}

int ProfileTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_ops.size());
}

int ProfileTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant ProfileTableModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount()) return {};
  const profiler::OpRecord& op = m_ops[index.row()];
  int column = index.column();
  if (role == CallRole) return op.index;
  if (role == SortRole) {
    switch (column) {
      case Index: return op.index;
      case Operators: return joinOps(op.ops).toLower();
      case Kernel: return qs(op.kernel);
      case Time: return op.timeUs;
      case Share: return op.percent;
      case Gflops: return op.gflops();
      case OutputShape: return qs(op.outputShape);
      case Flops: return op.flops;
      case Bytes: return op.bytes;
      case Calls: return op.calls;
    }
    return {};
  }
  if (role == Qt::DisplayRole) {
    switch (column) {
      case Index: return op.index;
      case Operators: return op.ops.empty() ? qs(op.name) : joinOps(op.ops);
      case Kernel: return qs(op.kernel);
      case Time: return formatUs(op.timeUs);
      case Share: return formatPercent(op.percent);
      case Gflops: return op.flops > 0 ? QString::number(op.gflops(), 'f', 1) : QStringLiteral("—");
      case OutputShape: return qs(op.outputShape);
      case Flops: return formatFlops(op.flops);
      case Bytes: return formatBytes(op.bytes);
      case Calls: return op.calls;
    }
    return {};
  }
  if (role == Qt::TextAlignmentRole) {
    if (column == Operators || column == Kernel || column == OutputShape)
      return QVariant::fromValue(Qt::AlignLeft | Qt::AlignVCenter);
    return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
  }
  if (role == Qt::ToolTipRole) {
    QString tip = QStringLiteral("<b>%1</b><br>kernel %2<br>inputs: %3<br>output: %4<br>median %5, mean %6, min %7")
                      .arg(qs(op.name).toHtmlEscaped(), qs(op.kernel))
                      .arg(qs([&] {
                             std::string s;
                             for (const auto& in : op.inputShapes) s += (s.empty() ? "" : ", ") + in;
                             return s;
                           }()),
                           qs(op.outputShape))
                      .arg(formatUs(op.timeUs), formatUs(op.meanUs), formatUs(op.minUs));
    return tip;
  }
  if (role == Qt::BackgroundRole && column == Time && m_maxTimeUs > 0) {
    // A light heat tint so the expensive calls stand out while scrolling.
    QColor c = heatColor(op.timeUs / m_maxTimeUs);
    c.setAlpha(110);
    return c;
  }
  return {};
}

QVariant ProfileTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal) return {};
  if (role == Qt::DisplayRole) {
    switch (section) {
      case Index: return QStringLiteral("#");
      case Operators: return QStringLiteral("Operators");
      case Kernel: return QStringLiteral("Kernel");
      case Time: return QStringLiteral("Median");
      case Share: return QStringLiteral("Share");
      case Gflops: return QStringLiteral("GFLOP/s");
      case OutputShape: return QStringLiteral("Output shape");
      case Flops: return QStringLiteral("FLOPs");
      case Bytes: return QStringLiteral("Bytes moved");
      case Calls: return QStringLiteral("Calls");
    }
  }
  if (role == Qt::ToolTipRole) {
    switch (section) {
      case Index: return QStringLiteral("Position in execution order");
      case Time: return QStringLiteral("Median time per call over the repeats");
      case Share: return QStringLiteral("Share of the sum of all calls' medians");
      case Gflops: return QStringLiteral("Achieved floating-point throughput of this call");
    }
  }
  return {};
}

ProfileFilterModel::ProfileFilterModel(QObject* parent) : QSortFilterProxyModel(parent) {
  setSortRole(ProfileTableModel::SortRole);
  setFilterCaseSensitivity(Qt::CaseInsensitive);
  setFilterKeyColumn(-1);
}

void ProfileFilterModel::setMinimumShare(double percent) {
  m_minShare = percent;
  invalidateFilter();
}

bool ProfileFilterModel::filterAcceptsRow(int sourceRow, const QModelIndex& sourceParent) const {
  const QAbstractItemModel* m = sourceModel();
  if (m_minShare > 0) {
    double share = m->data(m->index(sourceRow, ProfileTableModel::Share, sourceParent), ProfileTableModel::SortRole).toDouble();
    if (share < m_minShare) return false;
  }
  QString pattern = filterRegularExpression().pattern();
  if (pattern.isEmpty()) return true;
  for (int column : {ProfileTableModel::Operators, ProfileTableModel::Kernel, ProfileTableModel::OutputShape}) {
    QString text = m->data(m->index(sourceRow, column, sourceParent), Qt::DisplayRole).toString();
    if (text.contains(filterRegularExpression())) return true;
  }
  return false;
}

}  // namespace kiln::gui
