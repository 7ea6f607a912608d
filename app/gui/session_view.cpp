#include "app/gui/session_view.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QSortFilterProxyModel>
#include <QVBoxLayout>

#include "app/gui/format.h"

namespace kiln::gui {

SessionBrowser::SessionBrowser(QWidget* parent) : QWidget(parent) {
  m_model = new SessionTreeModel(this);
  m_tree = new QTreeView(this);
  m_tree->setModel(m_model);
  m_tree->setSelectionMode(QAbstractItemView::ExtendedSelection);
  m_tree->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_tree->setAlternatingRowColors(true);
  m_tree->setUniformRowHeights(true);
  m_tree->header()->setStretchLastSection(true);
  m_status = new QLabel(this);
  m_status->setWordWrap(true);
  m_status->setStyleSheet(QStringLiteral("color: #555"));
  auto* refresh = new QPushButton(tr("Refresh"), this);
  m_open = new QPushButton(tr("Open"), this);
  m_open->setToolTip(tr("Show this run's result in its view (double-click does the same)"));
  m_diff = new QPushButton(tr("Diff"), this);
  m_diff->setToolTip(tr("Select two profiled builds (Ctrl+click) to compare them per operator"));
  m_report = new QPushButton(tr("Report…"), this);
  m_report->setToolTip(tr("Write the selected session as an HTML or CSV report"));
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(refresh);
  buttons->addWidget(m_open);
  buttons->addWidget(m_diff);
  buttons->addWidget(m_report);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addLayout(buttons);
  layout->addWidget(m_tree, 1);
  layout->addWidget(m_status);

  connect(refresh, &QPushButton::clicked, this, &SessionBrowser::refreshRequested);
  auto openCurrent = [this] {
    QModelIndex i = m_tree->currentIndex();
    if (!i.isValid()) return;
    qlonglong run = i.data(SessionTreeModel::RunIdRole).toLongLong();
    if (run > 0) emit openRunRequested(i.data(SessionTreeModel::SessionIdRole).toLongLong(), run);
  };
  connect(m_open, &QPushButton::clicked, this, openCurrent);
  connect(m_tree, &QTreeView::doubleClicked, this, openCurrent);
  connect(m_diff, &QPushButton::clicked, this, [this] {
    std::vector<int64_t> builds = selectedProfiledBuilds();
    if (builds.size() == 2) emit diffRequested(builds[0], builds[1]);
  });
  connect(m_report, &QPushButton::clicked, this, [this] {
    if (int64_t s = currentSession()) emit reportRequested(s);
  });
  connect(m_tree->selectionModel(), &QItemSelectionModel::selectionChanged, this, &SessionBrowser::updateButtons);
  connect(m_model, &QAbstractItemModel::modelReset, this, &SessionBrowser::updateButtons);
  updateButtons();
}

void SessionBrowser::setSessions(std::vector<profiler::SessionData> sessions, const QString& dbPath) {
  m_model->setSessions(std::move(sessions));
  m_tree->expandToDepth(0);
  for (int c = 0; c < SessionTreeModel::ColumnCount - 1; ++c) m_tree->resizeColumnToContents(c);
  m_status->setText(m_model->rowCount() == 0 ? tr("No sessions yet in %1: profiles, comparisons and sweeps are kept here.").arg(dbPath)
                                             : tr("Store: %1").arg(dbPath));
  m_status->setToolTip(dbPath);
}

void SessionBrowser::setError(const QString& message) {
  m_status->setText(message);
}

std::vector<int64_t> SessionBrowser::selectedProfiledBuilds() const {
  std::vector<int64_t> builds;
  for (const QModelIndex& i : m_tree->selectionModel()->selectedRows()) {
    if (!i.data(SessionTreeModel::HasProfileRole).toBool()) continue;
    qlonglong b = i.data(SessionTreeModel::BuildIdRole).toLongLong();
    if (b > 0) builds.push_back(b);
  }
  std::sort(builds.begin(), builds.end());  // A: the older build
  return builds;
}

int64_t SessionBrowser::currentSession() const {
  QModelIndex i = m_tree->currentIndex();
  return i.isValid() ? i.data(SessionTreeModel::SessionIdRole).toLongLong() : 0;
}

void SessionBrowser::selectBuilds(const std::vector<int64_t>& buildIds) {
  QItemSelection selection;
  for (int s = 0; s < m_model->rowCount(); ++s) {
    QModelIndex session = m_model->index(s, 0);
    for (int r = 0; r < m_model->rowCount(session); ++r) {
      QModelIndex run = m_model->index(r, 0, session);
      qlonglong b = run.data(SessionTreeModel::BuildIdRole).toLongLong();
      if (std::find(buildIds.begin(), buildIds.end(), b) != buildIds.end() &&
          run.data(SessionTreeModel::HasProfileRole).toBool())
        selection.select(run, m_model->index(r, SessionTreeModel::ColumnCount - 1, session));
    }
  }
  m_tree->selectionModel()->select(selection, QItemSelectionModel::ClearAndSelect);
}

void SessionBrowser::updateButtons() {
  QModelIndex i = m_tree->currentIndex();
  m_open->setEnabled(i.isValid() && i.data(SessionTreeModel::RunIdRole).toLongLong() > 0);
  m_diff->setEnabled(selectedProfiledBuilds().size() == 2);
  m_report->setEnabled(i.isValid());
}

SessionDiffView::SessionDiffView(QWidget* parent) : QWidget(parent) {
  m_model = new BuildDiffModel(this);
  auto* proxy = new QSortFilterProxyModel(this);
  proxy->setSourceModel(m_model);
  proxy->setSortRole(BuildDiffModel::SortRole);
  m_header = new QLabel(this);
  m_header->setWordWrap(true);
  m_header->setTextFormat(Qt::RichText);
  m_table = new QTableView(this);
  m_table->setModel(proxy);
  m_table->setSortingEnabled(true);
  m_table->sortByColumn(-1, Qt::AscendingOrder);  // execution order until the user sorts
  m_table->verticalHeader()->hide();
  m_table->verticalHeader()->setDefaultSectionSize(22);
  m_table->setAlternatingRowColors(true);
  m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_table->setWordWrap(false);
  m_table->horizontalHeader()->setStretchLastSection(true);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addWidget(m_header);
  layout->addWidget(m_table, 1);
  clear(tr("Select two profiled builds in the Sessions browser (Ctrl+click) and press Diff."));
}

void SessionDiffView::clear(const QString& message) {
  m_model->setDiff({});
  m_header->setText(QStringLiteral("<i>%1</i>").arg(message.toHtmlEscaped()));
}

void SessionDiffView::setDiff(const app::BuildDiff& d) {
  m_model->setDiff(d);
  auto describe = [](const profiler::BuildRecord& b) {
    return QStringLiteral("<tt>%1</tt> -O%2, batch %3, %4 threads, %5 kernels")
        .arg(qs(b.target))
        .arg(b.optLevel)
        .arg(b.batch)
        .arg(b.threads)
        .arg(b.numKernels);
  };
  double speedup = d.endToEndMsB > 0 ? d.endToEndMsA / d.endToEndMsB : 0;
  m_header->setText(tr("<b>A</b> = build #%1: %2 — end to end <b>%3</b> (Σ calls %4)<br>"
                       "<b>B</b> = build #%5: %6 — end to end <b>%7</b> (Σ calls %8)<br>"
                       "B is <b>%9×</b> %10 than A end to end.")
                        .arg(d.buildA)
                        .arg(describe(d.a), formatMs(d.endToEndMsA), formatMs(d.sumMsA))
                        .arg(d.buildB)
                        .arg(describe(d.b), formatMs(d.endToEndMsB), formatMs(d.sumMsB))
                        .arg(speedup >= 1 ? speedup : (speedup > 0 ? 1 / speedup : 0), 0, 'f', 2)
                        .arg(speedup >= 1 ? tr("faster") : tr("slower")));
  m_table->resizeColumnsToContents();
}

}  // namespace kiln::gui
