#include "app/gui/diff_model.h"

#include <QColor>

#include "app/gui/format.h"

namespace kiln::gui {

void BuildDiffModel::setDiff(app::BuildDiff diff) {
  beginResetModel();
  m_diff = std::move(diff);
  endResetModel();
}

int BuildDiffModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_diff.rows.size());
}

int BuildDiffModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

namespace {
// B relative to A: -30% means B takes 30% less time.
double relativeChange(const app::OpDiffRow& r) {
  if (r.timeUsA <= 0 || r.timeUsB < 0) return 0;
  return 100.0 * (r.timeUsB - r.timeUsA) / r.timeUsA;
}
}  // namespace

QVariant BuildDiffModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount()) return {};
  const app::OpDiffRow& r = m_diff.rows[index.row()];
  bool both = r.timeUsA >= 0 && r.timeUsB >= 0;
  if (role == SortRole) {
    switch (index.column()) {
      case TimeA: return r.timeUsA;
      case TimeB: return r.timeUsB;
      case Change: return both ? relativeChange(r) : 1e9;
      default: return data(index, Qt::DisplayRole);
    }
  }
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case Key: return qs(r.key);
      case OpsA: return r.opsA.empty() ? QStringLiteral("—") : qs(r.opsA);
      case TimeA: return r.timeUsA < 0 ? QStringLiteral("—") : formatUs(r.timeUsA);
      case OpsB: return r.opsB.empty() ? QStringLiteral("—") : qs(r.opsB);
      case TimeB: return r.timeUsB < 0 ? QStringLiteral("—") : formatUs(r.timeUsB);
      case Change:
        if (!both) return QStringLiteral("—");
        return QStringLiteral("%1%2%").arg(relativeChange(r) > 0 ? "+" : "").arg(relativeChange(r), 0, 'f', 1);
      case Note: return qs(r.change);
    }
  }
  if (role == Qt::TextAlignmentRole) {
    bool numeric = index.column() == TimeA || index.column() == TimeB || index.column() == Change;
    return QVariant::fromValue((numeric ? Qt::AlignRight : Qt::AlignLeft) | Qt::AlignVCenter);
  }
  if (role == Qt::BackgroundRole && index.column() == Change && both) {
    // Green where B is faster, red where it is slower; changes under 5% are noise-coloured.
    double c = relativeChange(r);
    if (c < -5) return QColor(200, 240, 200);
    if (c > 5) return QColor(250, 205, 200);
  }
  if (role == Qt::ToolTipRole) return QStringLiteral("A: %1\nB: %2").arg(qs(r.kernelA), qs(r.kernelB));
  return {};
}

QVariant BuildDiffModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case Key: return QStringLiteral("Output");
    case OpsA: return QStringLiteral("Operators in A (build #%1)").arg(m_diff.buildA);
    case TimeA: return QStringLiteral("Time A");
    case OpsB: return QStringLiteral("Operators in B (build #%1)").arg(m_diff.buildB);
    case TimeB: return QStringLiteral("Time B");
    case Change: return QStringLiteral("B vs A");
    case Note: return QStringLiteral("Note");
  }
  return {};
}

}  // namespace kiln::gui
