#include "app/gui/compare_model.h"

#include <QBrush>

#include <cmath>

namespace kiln::gui {

QString backendStatusText(const app::BackendResult& r) {
  if (r.available) return {};
  QString status = r.status.empty() || r.status == "ok" ? QStringLiteral("unavailable") : qs(r.status);
  if (r.kernelFault) status += QStringLiteral(" (kernel fault)");
  return r.reason.empty() ? status : QStringLiteral("%1: %2").arg(status, qs(r.reason));
}

void CompareTableModel::setRows(std::vector<CompareRow> rows) {
  beginResetModel();
  m_rows = std::move(rows);
  m_spreads.clear();
  for (const CompareRow& row : m_rows) m_spreads.push_back(row.result.spread());
  endResetModel();
}

bool CompareTableModel::eagerRan() const { return eagerMs() > 0; }

double CompareTableModel::eagerMs() const {
  for (size_t i = 0; i < m_rows.size(); ++i)
    if (m_rows[i].backend == "pytorch-eager" && m_rows[i].result.available) return m_spreads[i].medianMs;
  return 0;
}

int CompareTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_rows.size());
}

int CompareTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant CompareTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal) return {};
  if (role == Qt::ToolTipRole) {
    switch (section) {
      case Iqr: return tr("Interquartile range: the middle half of the repeats");
      case Processes: return tr("The median of each worker process that timed the backend; ⚠ when they differ by more than 10 %");
      case Speedup: return tr("PyTorch eager's median / this median");
      case MaxDiff:
        return tr("The largest absolute difference of the outputs from PyTorch eager's (NaN: a NaN in an output); "
                  "✗ beyond %1 of eager's largest output (%2 for int8 models): not the same computation")
            .arg(profiler::kOutputTolerance)
            .arg(profiler::kQuantizedOutputTolerance);
      default: return {};
    }
  }
  if (role != Qt::DisplayRole) return {};
  switch (section) {
    case Backend: return tr("Backend");
    case Median: return tr("Median");
    case Iqr: return tr("IQR (q1–q3)");
    case MinMax: return tr("Min–max");
    case Samples: return tr("Repeats");
    case Processes: return tr("Per process");
    case Speedup: return tr("Speed-up");
    case MaxDiff: return tr("Max |diff|");
    case Note: return tr("Note");
    default: return {};
  }
}

QString CompareTableModel::text(size_t i, int column) const {
  const CompareRow& row = m_rows[i];
  const app::BackendResult& r = row.result;
  const profiler::Spread& s = m_spreads[i];
  if (column == Backend) return s.processesDisagree ? QStringLiteral("⚠ ") + row.label : row.label;
  if (column == Note) {
    if (!r.available) return backendStatusText(r);
    QStringList notes;
    if (r.outputsDiffer()) notes << tr("✗ outputs differ from eager's: not the same computation");
    if (QString d = disagreementText(s); !d.isEmpty()) notes << d;
    return notes.join(QStringLiteral("; "));
  }
  if (!r.available) return {};
  switch (column) {
    case Median: return formatMs(s.medianMs);
    case Iqr: return formatMsRange(s.q1Ms, s.q3Ms);
    case MinMax: return formatMsRange(s.minMs, s.maxMs);
    case Samples: return QString::number(s.samples);
    case Processes: return s.processMedianMs.size() > 1 ? formatMsList(s.processMedianMs) : QString();
    case Speedup:  // none for a row that computes something else
      return eagerMs() > 0 && s.medianMs > 0 && !r.outputsDiffer()
                 ? QStringLiteral("%1×").arg(eagerMs() / s.medianMs, 0, 'f', 2)
                 : QString();
    case MaxDiff:
      if (row.backend == "pytorch-eager") return tr("(reference)");
      // Without eager's outputs there is nothing to compare with (the façade says NaN then).
      if (!eagerRan()) return tr("— (no reference)");
      return r.outputsDiffer() ? QStringLiteral("✗ ") + formatMaxDiff(r.maxAbsDiff) : formatMaxDiff(r.maxAbsDiff);
    default: return {};
  }
}

QVariant CompareTableModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const size_t i = static_cast<size_t>(index.row());
  const app::BackendResult& r = m_rows[i].result;
  const profiler::Spread& s = m_spreads[i];
  switch (role) {
    case Qt::DisplayRole: return text(i, index.column());
    case Qt::ToolTipRole: return toolTip(index.row());
    case DisagreeRole: return s.processesDisagree;
    case StatusRole: return qs(r.status);
    case DifferRole: return r.available && r.outputsDiffer();
    case Qt::TextAlignmentRole:
      if (index.column() == Backend || index.column() == Note) return QVariant(Qt::AlignLeft | Qt::AlignVCenter);
      return QVariant(Qt::AlignRight | Qt::AlignVCenter);
    case Qt::BackgroundRole:
      if (r.available && r.outputsDiffer() && (index.column() == MaxDiff || index.column() == Note))
        return QBrush(QColor(kDifferBackground));
      return r.available && s.processesDisagree ? QBrush(QColor(kDisagreeBackground)) : QVariant();
    case Qt::ForegroundRole:
      if (!r.available) return QBrush(QColor(r.status == "unavailable" || r.status.empty() ? kUnavailableText : kFailedText));
      if (r.outputsDiffer() && (index.column() == MaxDiff || index.column() == Note)) return QBrush(QColor(kFailedText));
      if (s.processesDisagree && (index.column() == Backend || index.column() == Processes || index.column() == Note))
        return QBrush(QColor(kDisagreeText));
      return {};
    case SortRole:
      switch (index.column()) {
        case Median: return s.medianMs;
        case Iqr: return s.q3Ms - s.q1Ms;
        case MinMax: return s.maxMs - s.minMs;
        case Samples: return static_cast<qulonglong>(s.samples);
        case Speedup: return eagerMs() > 0 && s.medianMs > 0 ? eagerMs() / s.medianMs : 0.0;
        case MaxDiff: return r.maxAbsDiff;
        default: return text(i, index.column());
      }
    default: return {};
  }
}

QString CompareTableModel::toolTip(int row) const {
  if (row < 0 || row >= rowCount()) return {};
  const CompareRow& c = m_rows[static_cast<size_t>(row)];
  const profiler::Spread& s = m_spreads[static_cast<size_t>(row)];
  if (!c.result.available) return QStringLiteral("%1 — %2").arg(c.label, backendStatusText(c.result));
  QString tip = c.label + QLatin1Char('\n') + spreadText(s);
  if (eagerMs() > 0 && s.medianMs > 0 && c.backend != "pytorch-eager" && !c.result.outputsDiffer())
    tip += QStringLiteral("\n%1× the speed of PyTorch eager").arg(eagerMs() / s.medianMs, 0, 'f', 2);
  if (c.backend != "pytorch-eager" && eagerRan())
    tip += QStringLiteral("\nmax |diff| of the outputs vs eager: %1").arg(formatMaxDiff(c.result.maxAbsDiff));
  if (c.result.outputsDiffer())
    tip += QStringLiteral("\n✗ beyond its bound %1: this row computes something else, so its time is not comparable")
               .arg(QString::number(c.result.outputBound, 'g', 3));
  // The backend's versions, BLAS/oneDNN build and thread settings, as its worker reported them.
  if (std::string facts = app::backendFactsLine(c.result.facts); !facts.empty()) tip += QLatin1Char('\n') + qs(facts);
  return tip;
}

}  // namespace kiln::gui
