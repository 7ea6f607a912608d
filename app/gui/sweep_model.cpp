#include "app/gui/sweep_model.h"

#include <QBrush>

#include <algorithm>

namespace kiln::gui {

void SweepPointModel::setResult(const app::SweepResult& result) {
  beginResetModel();
  m_rows.clear();
  std::vector<std::string> backends = result.backends;
  for (const auto& m : result.points)  // points of a backend the sweep did not list still show
    if (std::find(backends.begin(), backends.end(), m.backend) == backends.end()) backends.push_back(m.backend);
  for (const std::string& backend : backends) {
    std::vector<Row> rows;
    for (const auto& m : result.points)
      if (m.backend == backend) rows.push_back({m, m.spread()});
    std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.m.batch < b.m.batch; });
    m_rows.insert(m_rows.end(), rows.begin(), rows.end());
  }
  endResetModel();
}

void SweepPointModel::clear() {
  beginResetModel();
  m_rows.clear();
  endResetModel();
}

const profiler::Measurement* SweepPointModel::point(const std::string& backend, int64_t batch) const {
  for (const auto& r : m_rows)
    if (r.m.backend == backend && r.m.batch == batch) return &r.m;
  return nullptr;
}

QString SweepPointModel::toolTip(const profiler::Measurement& m) {
  QString head = QStringLiteral("%1 at batch %2").arg(backendLabel(m.backend)).arg(m.batch);
  if (!m.ok()) {
    QString status = QString::fromLatin1(profiler::statusName(m.status));
    return m.reason.empty() ? QStringLiteral("%1 — %2").arg(head, status)
                            : QStringLiteral("%1 — %2: %3").arg(head, status, qs(m.reason));
  }
  return head + QLatin1Char('\n') + spreadText(m.spread()) +
         QStringLiteral("\n%1 items/s at the median").arg(m.throughput(), 0, 'f', 1);
}

int SweepPointModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_rows.size());
}

int SweepPointModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant SweepPointModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case Backend: return tr("Backend");
    case Batch: return tr("Batch");
    case Median: return tr("Median");
    case Iqr: return tr("IQR (q1–q3)");
    case MinMax: return tr("Min–max");
    case Throughput: return tr("Items/s");
    case Processes: return tr("Per process");
    case Note: return tr("Note");
    default: return {};
  }
}

QString SweepPointModel::text(const Row& row, int column) const {
  const profiler::Measurement& m = row.m;
  const profiler::Spread& s = row.spread;
  if (column == Backend) return (s.processesDisagree && m.ok() ? QStringLiteral("⚠ ") : QString()) + backendLabel(m.backend);
  if (column == Batch) return QString::number(m.batch);
  if (column == Note) {
    if (m.ok()) return disagreementText(s);
    QString status = QString::fromLatin1(profiler::statusName(m.status));
    return m.reason.empty() ? status : QStringLiteral("%1: %2").arg(status, qs(m.reason));
  }
  if (!m.ok()) return {};
  switch (column) {
    case Median: return formatMs(s.medianMs);
    case Iqr: return formatMsRange(s.q1Ms, s.q3Ms);
    case MinMax: return formatMsRange(s.minMs, s.maxMs);
    case Throughput: return QString::number(m.throughput(), 'f', m.throughput() >= 100 ? 0 : 1);
    case Processes: return s.processMedianMs.size() > 1 ? formatMsList(s.processMedianMs) : QString();
    default: return {};
  }
}

QVariant SweepPointModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const Row& row = m_rows[static_cast<size_t>(index.row())];
  const profiler::Measurement& m = row.m;
  bool disagree = m.ok() && row.spread.processesDisagree;
  switch (role) {
    case Qt::DisplayRole: return text(row, index.column());
    case Qt::ToolTipRole: return toolTip(m);
    case DisagreeRole: return disagree;
    case BackendRole: return qs(m.backend);
    case BatchRole: return static_cast<qlonglong>(m.batch);
    case Qt::TextAlignmentRole:
      if (index.column() == Backend || index.column() == Note) return QVariant(Qt::AlignLeft | Qt::AlignVCenter);
      return QVariant(Qt::AlignRight | Qt::AlignVCenter);
    case Qt::BackgroundRole: return disagree ? QBrush(QColor(kDisagreeBackground)) : QVariant();
    case Qt::ForegroundRole:
      if (!m.ok()) return QBrush(QColor(m.status == profiler::Status::Skipped ? kUnavailableText : kFailedText));
      if (disagree && (index.column() == Backend || index.column() == Processes || index.column() == Note))
        return QBrush(QColor(kDisagreeText));
      return {};
    case SortRole:
      switch (index.column()) {
        case Batch: return static_cast<qlonglong>(m.batch);
        case Median: return row.spread.medianMs;
        case Iqr: return row.spread.q3Ms - row.spread.q1Ms;
        case MinMax: return row.spread.maxMs - row.spread.minMs;
        case Throughput: return m.throughput();
        default: return text(row, index.column());
      }
    default: return {};
  }
}

}  // namespace kiln::gui
