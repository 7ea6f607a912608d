#include "app/gui/session_model.h"

#include <QDateTime>
#include <QIcon>

#include <algorithm>

#include "app/gui/format.h"

namespace kiln::gui {

namespace {

// Stored dates are ISO 8601 UTC; show them in local time without seconds.
QString shortDate(const std::string& iso) {
  QDateTime t = QDateTime::fromString(qs(iso), Qt::ISODate);
  if (!t.isValid()) return qs(iso);
  return t.toLocalTime().toString(QStringLiteral("yyyy-MM-dd HH:mm"));
}

const profiler::StoredBuild* buildOfRun(const profiler::SessionData& s, int64_t runId) {
  for (const auto& b : s.builds)
    if (b.runId == runId) return &b;
  return nullptr;
}

QString buildText(const profiler::BuildRecord& b) {
  return QStringLiteral("%1, -O%2, batch %3, %4 threads")
      .arg(qs(b.target))
      .arg(b.optLevel)
      .arg(b.batch)
      .arg(b.threads);
}

}  // namespace

void SessionTreeModel::setSessions(std::vector<profiler::SessionData> sessions) {
  beginResetModel();
  m_sessions = std::move(sessions);
  for (auto& s : m_sessions)
    std::sort(s.runs.begin(), s.runs.end(), [](const auto& a, const auto& b) { return a.id > b.id; });
  endResetModel();
}

const profiler::SessionData* SessionTreeModel::session(int64_t id) const {
  for (const auto& s : m_sessions)
    if (s.summary.id == id) return &s;
  return nullptr;
}

// Top-level rows carry internalId 0; a run row carries its session's row + 1.
QModelIndex SessionTreeModel::index(int row, int column, const QModelIndex& parent) const {
  if (!hasIndex(row, column, parent)) return {};
  if (!parent.isValid()) return createIndex(row, column, quintptr(0));
  return createIndex(row, column, quintptr(parent.row() + 1));
}

QModelIndex SessionTreeModel::parent(const QModelIndex& child) const {
  if (!child.isValid() || child.internalId() == 0) return {};
  return createIndex(static_cast<int>(child.internalId() - 1), 0, quintptr(0));
}

int SessionTreeModel::rowCount(const QModelIndex& parent) const {
  if (!parent.isValid()) return static_cast<int>(m_sessions.size());
  if (parent.column() != 0 || parent.internalId() != 0) return 0;
  return static_cast<int>(m_sessions[parent.row()].runs.size());
}

int SessionTreeModel::columnCount(const QModelIndex&) const { return ColumnCount; }

QVariant SessionTreeModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid()) return {};
  if (index.internalId() == 0) return sessionData(m_sessions[index.row()], index.column(), role);
  const profiler::SessionData& s = m_sessions[index.internalId() - 1];
  return runData(s, s.runs[index.row()], index.column(), role);
}

QVariant SessionTreeModel::sessionData(const profiler::SessionData& s, int column, int role) const {
  const profiler::SessionSummary& sum = s.summary;
  switch (role) {
    case SessionIdRole: return QVariant::fromValue<qlonglong>(sum.id);
    case RunIdRole:
    case BuildIdRole: return QVariant::fromValue<qlonglong>(0);
    case KindRole: return QStringLiteral("session");
    case HasProfileRole: return false;
    case Qt::ToolTipRole: return QStringLiteral("%1\n%2").arg(qs(sum.model.path), qs(sum.model.sha256).left(16));
    case Qt::DisplayRole:
      switch (column) {
        case Name:
          return QStringLiteral("%1  #%2%3")
              .arg(qs(sum.model.name))
              .arg(sum.id)
              .arg(sum.label.empty() ? QString() : QStringLiteral(" — ") + qs(sum.label));
        case When: return shortDate(sum.updatedAt);
        case Details: return QStringLiteral("%1 runs, %2 builds").arg(sum.runs).arg(sum.builds);
        case Result:
          return QStringLiteral("%1 profiles, %2 sweeps").arg(sum.profiles).arg(sum.sweeps);
      }
  }
  return {};
}

QVariant SessionTreeModel::runData(const profiler::SessionData& s, const profiler::StoredRun& run, int column,
                                   int role) const {
  const profiler::StoredBuild* build = buildOfRun(s, run.id);
  bool hasProfile = false;
  for (const auto& p : s.profiles) hasProfile |= p.runId == run.id;
  switch (role) {
    case SessionIdRole: return QVariant::fromValue<qlonglong>(s.summary.id);
    case RunIdRole: return QVariant::fromValue<qlonglong>(run.id);
    case BuildIdRole: return QVariant::fromValue<qlonglong>(build ? build->id : 0);
    case KindRole: return qs(run.kind);
    case HasProfileRole: return hasProfile;
    case Qt::ToolTipRole:
      return QStringLiteral("%1 run #%2 on %3\n%4 threads, BLAS %5, Kiln %6")
          .arg(qs(run.kind))
          .arg(run.id)
          .arg(qs(run.context.cpu))
          .arg(run.context.threads)
          .arg(qs(run.context.blas), qs(run.context.kilnVersion));
    case Qt::DisplayRole: break;
    default: return {};
  }
  switch (column) {
    case Name: return QStringLiteral("%1 #%2").arg(qs(run.kind)).arg(run.id);
    case When: return shortDate(run.createdAt);
    case Details:
      if (build) return buildText(build->build);
      return QStringLiteral("%1, -O%2, %3 threads").arg(qs(run.context.target)).arg(run.context.optLevel).arg(run.context.threads);
    case Result: {
      if (run.kind == "profile") {
        for (const auto& p : s.profiles)
          if (p.runId == run.id) return QStringLiteral("end to end %1").arg(formatMs(p.profile.endToEnd.medianMs));
      }
      if (run.kind == "sweep") {
        for (const auto& sw : s.sweeps) {
          if (sw.runId != run.id) continue;
          QStringList batches;
          for (int64_t b : sw.batches) batches << QString::number(b);
          return QStringLiteral("batches %1").arg(batches.join(','));
        }
      }
      if (run.kind == "compare") {
        double kiln = 0, eager = 0;
        for (const auto& m : s.measurements) {
          if (m.runId != run.id || !m.measurement.ok()) continue;
          if (m.measurement.backend == "kiln") kiln = m.measurement.timing.medianMs;
          if (m.measurement.backend == "pytorch-eager") eager = m.measurement.timing.medianMs;
        }
        if (kiln > 0 && eager > 0)
          return QStringLiteral("Kiln %1 (%2× vs eager)").arg(formatMs(kiln)).arg(eager / kiln, 0, 'f', 2);
        if (kiln > 0) return QStringLiteral("Kiln %1").arg(formatMs(kiln));
      }
      return {};
    }
  }
  return {};
}

QVariant SessionTreeModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case Name: return QStringLiteral("Session / run");
    case When: return QStringLiteral("When");
    case Details: return QStringLiteral("Build");
    case Result: return QStringLiteral("Result");
  }
  return {};
}

}  // namespace kiln::gui
