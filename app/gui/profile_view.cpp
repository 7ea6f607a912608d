#include "app/gui/profile_view.h"

#include <QBarCategoryAxis>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QHorizontalBarSeries>
#include <QSplitter>
#include <QValueAxis>
#include <QVBoxLayout>

#include <algorithm>

#include "app/gui/chart_util.h"
#include "app/gui/format.h"

namespace kiln::gui {

ProfileView::ProfileView(QWidget* parent) : QWidget(parent) {
  m_model = new ProfileTableModel(this);
  m_proxy = new ProfileFilterModel(this);
  m_proxy->setSourceModel(m_model);

  m_summary = new QLabel(this);
  m_summary->setTextFormat(Qt::RichText);
  m_summary->setWordWrap(true);
  m_filter = new QLineEdit(this);
  m_filter->setPlaceholderText(tr("Filter by operator, kernel or shape…"));
  m_filter->setClearButtonEnabled(true);
  m_byOperator = new QCheckBox(tr("Group by operator kind"), this);
  m_byOperator->setToolTip(tr("One row per anchor operator (all its calls summed) instead of one row per call"));
  m_topN = new QSpinBox(this);
  m_topN->setRange(3, 40);
  m_topN->setValue(12);
  m_topN->setPrefix(tr("top "));
  m_topN->setToolTip(tr("Bars in the chart"));

  m_table = new QTableView(this);
  m_table->setModel(m_proxy);
  m_table->setSortingEnabled(true);
  m_table->sortByColumn(ProfileTableModel::Time, Qt::DescendingOrder);
  m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_table->setSelectionMode(QAbstractItemView::SingleSelection);
  m_table->setAlternatingRowColors(true);
  m_table->verticalHeader()->hide();
  m_table->verticalHeader()->setDefaultSectionSize(22);
  m_table->horizontalHeader()->setStretchLastSection(true);
  m_table->setWordWrap(false);

  m_chartView = new QChartView(this);
  m_chartView->setRenderHint(QPainter::Antialiasing);
  m_chartView->setMinimumWidth(360);

  auto* bar = new QHBoxLayout;
  bar->addWidget(m_filter, 1);
  bar->addWidget(m_byOperator);
  bar->addWidget(m_topN);
  auto* left = new QWidget(this);
  auto* leftLayout = new QVBoxLayout(left);
  leftLayout->setContentsMargins(0, 0, 0, 0);
  leftLayout->addLayout(bar);
  leftLayout->addWidget(m_table, 1);
  auto* split = new QSplitter(Qt::Horizontal, this);
  split->addWidget(left);
  split->addWidget(m_chartView);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  split->setSizes({560, 440});
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addWidget(m_summary);
  layout->addWidget(split, 1);

  connect(m_filter, &QLineEdit::textChanged, this, [this](const QString& t) {
    m_proxy->setFilterRegularExpression(QRegularExpression(QRegularExpression::escape(t),
                                                           QRegularExpression::CaseInsensitiveOption));
  });
  connect(m_byOperator, &QCheckBox::toggled, this, &ProfileView::rebuild);
  connect(m_topN, &QSpinBox::valueChanged, this, &ProfileView::rebuildChart);
  connect(m_table, &QTableView::activated, this, [this](const QModelIndex& index) {
    if (!m_byOperator->isChecked()) emit callActivated(index.data(ProfileTableModel::CallRole).toInt());
  });
  clear(tr("No profile yet: press Profile (Ctrl+P) to time every kernel call."));
}

QChart* ProfileView::chart() const { return m_chartView->chart(); }

bool ProfileView::selectCall(int call) {
  if (m_byOperator->isChecked()) return false;
  for (int row = 0; row < m_proxy->rowCount(); ++row) {
    QModelIndex index = m_proxy->index(row, 0);
    if (index.data(ProfileTableModel::CallRole).toInt() != call) continue;
    m_table->selectRow(row);
    m_table->scrollTo(index);
    return true;
  }
  return false;
}

void ProfileView::clear(const QString& message) {
  m_profile.reset();
  m_model->clear();
  m_summary->setText(QStringLiteral("<i>%1</i>").arg(message.toHtmlEscaped()));
  auto* chart = new QChart;
  chart->setTitle(tr("Where the time goes"));
  chart->legend()->hide();
  replaceChart(m_chartView, chart);
  m_barCount = 0;
}

void ProfileView::setProfile(const profiler::ProfileRecord& profile, const QString& title) {
  m_profile = profile;
  m_title = title;
  rebuild();
}

void ProfileView::rebuild() {
  if (!m_profile) return;
  const profiler::ProfileRecord& p = *m_profile;
  m_model->setOps(m_byOperator->isChecked() ? app::operatorSummary(p) : p.ops);
  m_table->resizeColumnsToContents();
  m_table->setColumnWidth(ProfileTableModel::Operators, std::clamp(m_table->columnWidth(ProfileTableModel::Operators), 160, 260));
  double gap = p.gapPercent();
  m_summary->setText(
      tr("<b>%1</b> — batch %2, %3 repeats, %4 calls.&nbsp;&nbsp; End to end: <b>%5</b> median (%6 mean). "
         "Σ per-call medians: <b>%7</b> (%8 means); %9")
          .arg(m_title.toHtmlEscaped())
          .arg(p.batch)
          .arg(p.repeat)
          .arg(p.ops.size())
          .arg(formatMs(p.endToEnd.medianMs), formatMs(p.endToEnd.meanMs), formatMs(p.sumMs), formatMs(p.sumMeanMs),
               gap >= 0 ? tr("per-call timing misses <b>%1</b> of the end-to-end time (launch overhead between calls).")
                              .arg(formatPercent(gap))
                        : tr("calls timed one by one add up to <b>%1</b> more than the end-to-end run "
                             "(timer overhead, and calls run alone lose the overlap of a whole run).")
                              .arg(formatPercent(-gap))));
  rebuildChart();
}

void ProfileView::rebuildChart() {
  if (!m_profile) return;
  std::vector<profiler::OpRecord> ops = m_model->ops();
  std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.timeUs > b.timeUs; });
  int n = std::min<int>(m_topN->value(), static_cast<int>(ops.size()));
  double rest = 0;
  // A call inside an if/loop is part of its top-level call's share: "other calls" counts
  // top-level rows only.
  for (size_t i = n; i < ops.size(); ++i)
    if (ops[i].parent < 0) rest += ops[i].percent;

  // Horizontal bars draw the first category at the bottom: add the largest last.
  auto* set = new QBarSet(tr("share of total"));
  set->setColor(QColor(0xe6, 0x6a, 0x1f));
  set->setBorderColor(QColor(0xe6, 0x6a, 0x1f));
  QStringList categories;
  if (rest > 0) {
    categories << tr("%n other call(s)", nullptr, static_cast<int>(ops.size()) - n);
    *set << rest;
  }
  bool grouped = m_byOperator->isChecked();
  for (int i = n - 1; i >= 0; --i) {
    QString label = ops[i].ops.empty() ? qs(ops[i].kernel) : joinOps(ops[i].ops, QStringLiteral("+"));
    if (label.size() > 30) label = label.left(28) + QStringLiteral("…");
    // Categories must be unique; the call index also helps find the row in the table.
    categories << (grouped ? label : QStringLiteral("#%1 %2").arg(ops[i].index).arg(label));
    *set << ops[i].percent;
  }
  auto* series = new QHorizontalBarSeries;
  series->append(set);
  series->setLabelsVisible(true);
  series->setLabelsFormat(QStringLiteral("@value%"));
  series->setLabelsPrecision(3);
  series->setLabelsPosition(QAbstractBarSeries::LabelsOutsideEnd);
  series->setBarWidth(0.75);

  auto* chart = new QChart;
  chart->addSeries(series);
  chart->setTitle(grouped ? tr("Top %1 operators by share of the total").arg(n) : tr("Top %1 calls by share of the total").arg(n));
  chart->legend()->hide();
  chart->setMargins(QMargins(4, 4, 12, 4));
  auto* y = new QBarCategoryAxis;
  y->append(categories);
  QFont f = y->labelsFont();
  f.setPointSizeF(f.pointSizeF() * 0.85);
  y->setLabelsFont(f);
  chart->addAxis(y, Qt::AlignLeft);
  series->attachAxis(y);
  auto* x = new QValueAxis;
  double maxShare = 0;
  for (int i = 0; i < set->count(); ++i) maxShare = std::max(maxShare, set->at(i));
  x->setRange(0, std::max(1.0, maxShare * 1.2));  // room for the value labels
  x->setLabelFormat(QStringLiteral("%.0f%%"));
  x->setTitleText(tr("% of Σ per-call medians"));
  x->setLabelsFont(f);
  chart->addAxis(x, Qt::AlignBottom);
  series->attachAxis(x);
  replaceChart(m_chartView, chart);
  m_barCount = set->count();
}

}  // namespace kiln::gui
