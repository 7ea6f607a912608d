#include "app/gui/compare_view.h"

#include <QBarCategoryAxis>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QGraphicsSimpleTextItem>
#include <QHeaderView>
#include <QLineSeries>
#include <QStackedBarSeries>
#include <QValueAxis>
#include <QVBoxLayout>
#include <QSplitter>

#include <algorithm>

#include "app/gui/chart_util.h"
#include "app/gui/format.h"

namespace kiln::gui {

CompareView::CompareView(QWidget* parent) : QWidget(parent) {
  m_summary = new QLabel(this);
  m_summary->setWordWrap(true);
  m_torchCompile = new QCheckBox(tr("Also try torch.compile (Python subprocess, slow to start)"), this);
  m_chartView = new QChartView(this);
  m_chartView->setRenderHint(QPainter::Antialiasing);
  m_table = new QTreeWidget(this);
  m_table->setRootIsDecorated(false);
  m_table->setHeaderLabels({tr("Backend"), tr("Median"), tr("Min"), tr("Max"), tr("Std dev"), tr("Samples"),
                            tr("Speed-up vs eager"), tr("Max |diff| vs eager"), tr("Note")});
  m_table->header()->setSectionResizeMode(QHeaderView::ResizeToContents);
  m_table->setMaximumHeight(170);
  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(m_chartView);
  split->addWidget(m_table);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 1);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addWidget(m_summary);
  layout->addWidget(m_torchCompile);
  layout->addWidget(split, 1);
  clear(tr("No comparison yet: press Compare (Ctrl+R) to time PyTorch and Kiln on the same input."));
}

QChart* CompareView::chart() const { return m_chartView->chart(); }

void CompareView::clear(const QString& message) {
  m_bars.clear();
  m_unavailable.clear();
  m_labels.clear();
  m_eagerMs = 0;
  m_table->clear();
  m_summary->setText(QStringLiteral("<i>%1</i>").arg(message.toHtmlEscaped()));
  auto* chart = new QChart;
  chart->setTitle(tr("Latency per inference"));
  chart->legend()->hide();
  replaceChart(m_chartView, chart);
}

void CompareView::addResult(const app::CompareResult& result, const QString& kilnLabel) {
  // PyTorch bars always come from the latest comparison; Kiln builds accumulate.
  std::vector<Bar> kiln;
  for (auto& b : m_bars)
    if (b.backend == "kiln" && b.label != kilnLabel) kiln.push_back(b);
  m_bars.clear();
  m_unavailable.clear();
  m_eagerMs = 0;
  for (const auto& r : result.backends) {
    Bar bar{r.backend == "kiln" ? kilnLabel : backendLabel(r.backend), r.backend, r};
    if (!r.available) {
      m_unavailable.push_back(bar);
      continue;
    }
    if (r.backend == "pytorch-eager") m_eagerMs = r.medianMs;
    if (r.backend == "kiln") kiln.push_back(bar);
    else m_bars.push_back(bar);
  }
  m_bars.insert(m_bars.end(), kiln.begin(), kiln.end());
  m_summary->setText(tr("<b>%1</b>, batch %2, %3 threads on %4 — target <tt>%5</tt>; PyTorch %6 with %7. "
                        "Bars: median; whiskers: min–max over %8 repeats.")
                         .arg(qs(result.model))
                         .arg(result.batch)
                         .arg(result.threads)
                         .arg(qs(result.cpu), qs(result.target), qs(result.torchVersion), qs(result.blas))
                         .arg(result.backends.empty() ? 0 : result.backends.front().samplesMs.size()));
  rebuild();
}

void CompareView::rebuild() {
  auto* chart = new QChart;
  chart->setTitle(tr("Latency per inference (lower is better)"));
  chart->legend()->hide();
  chart->setMargins(QMargins(8, 8, 8, 8));

  // One stacked set per bar, zero elsewhere: the only way to give each bar its own colour.
  auto* series = new QStackedBarSeries;
  QStringList categories;
  double top = 0;
  for (size_t i = 0; i < m_bars.size(); ++i) {
    categories << m_bars[i].label;
    auto* set = new QBarSet(m_bars[i].label);
    for (size_t j = 0; j < m_bars.size(); ++j) *set << (i == j ? m_bars[i].result.medianMs : 0.0);
    QColor c = backendColor(m_bars[i].backend);
    set->setColor(c);
    set->setBorderColor(c.darker(115));
    series->append(set);
    // One wild outlier (a loaded machine) must not squash every bar: whiskers are clipped at
    // 2.5× their median; the table keeps the real maximum.
    top = std::max(top, std::min(m_bars[i].result.maxMs, 2.5 * m_bars[i].result.medianMs));
  }
  series->setBarWidth(0.55);
  chart->addSeries(series);
  auto* x = new QBarCategoryAxis;
  x->append(categories);
  chart->addAxis(x, Qt::AlignBottom);
  series->attachAxis(x);
  auto* y = new QValueAxis;
  y->setRange(0, top > 0 ? top * 1.3 : 1);  // headroom for the labels above the whiskers
  y->setTitleText(tr("milliseconds"));
  y->setLabelFormat(top * 1.3 >= 20 ? QStringLiteral("%.0f") : QStringLiteral("%.2f"));
  y->applyNiceNumbers();
  chart->addAxis(y, Qt::AlignLeft);
  series->attachAxis(y);

  // Whiskers: an I-beam from min to max per bar, on the category axis' value scale.
  for (size_t i = 0; i < m_bars.size(); ++i) {
    const auto& r = m_bars[i].result;
    auto* w = new QLineSeries;
    double cx = static_cast<double>(i), cap = 0.08;
    *w << QPointF(cx - cap, r.minMs) << QPointF(cx + cap, r.minMs) << QPointF(cx, r.minMs) << QPointF(cx, r.maxMs)
       << QPointF(cx - cap, r.maxMs) << QPointF(cx + cap, r.maxMs);
    w->setPen(QPen(QColor(0x30, 0x30, 0x30), 1.4));
    chart->addSeries(w);
    w->attachAxis(x);
    w->attachAxis(y);
  }

  m_labels.clear();
  for (const auto& b : m_bars) {
    QString text = formatMs(b.result.medianMs);
    if (m_eagerMs > 0 && b.result.medianMs > 0)
      text += QStringLiteral("\n%1× vs eager").arg(m_eagerMs / b.result.medianMs, 0, 'f', 2);
    auto* label = new QGraphicsSimpleTextItem(text, chart);
    QFont f = label->font();
    f.setBold(b.backend == "kiln");
    label->setFont(f);
    m_labels.push_back(label);
  }
  connect(chart, &QChart::plotAreaChanged, this, [this] { placeLabels(); });
  replaceChart(m_chartView, chart);
  placeLabels();

  m_table->clear();
  auto addRow = [this](const Bar& b) {
    const auto& r = b.result;
    auto* item = new QTreeWidgetItem(m_table);
    item->setText(0, b.label);
    if (!r.available) {
      item->setText(8, tr("unavailable: %1").arg(qs(r.reason)));
      item->setForeground(0, QColor(0x88, 0x88, 0x88));
      return;
    }
    item->setText(1, formatMs(r.medianMs));
    item->setText(2, formatMs(r.minMs));
    item->setText(3, formatMs(r.maxMs));
    item->setText(4, formatMs(r.stddevMs));
    item->setText(5, QString::number(r.samplesMs.size()));
    item->setText(6, m_eagerMs > 0 && r.medianMs > 0 ? QStringLiteral("%1×").arg(m_eagerMs / r.medianMs, 0, 'f', 2) : QString());
    item->setText(7, b.backend == "pytorch-eager" ? QStringLiteral("(reference)") : QString::number(r.maxAbsDiff, 'g', 3));
    for (int c = 1; c <= 7; ++c) item->setTextAlignment(c, Qt::AlignRight | Qt::AlignVCenter);
  };
  for (const auto& b : m_bars) addRow(b);
  for (const auto& b : m_unavailable) addRow(b);
}

void CompareView::placeLabels() {
  QChart* chart = m_chartView->chart();
  if (!chart || chart->series().isEmpty()) return;
  QAbstractSeries* series = chart->series().front();
  for (size_t i = 0; i < m_labels.size() && i < m_bars.size(); ++i) {
    auto* axis = qobject_cast<QValueAxis*>(chart->axes(Qt::Vertical).value(0));
    double y = std::min(m_bars[i].result.maxMs, axis ? axis->max() * 0.9 : m_bars[i].result.maxMs);
    QPointF top = chart->mapToPosition(QPointF(static_cast<double>(i), y), series);
    QRectF r = m_labels[i]->boundingRect();
    m_labels[i]->setPos(top.x() - r.width() / 2, top.y() - r.height() - 4);
  }
}

}  // namespace kiln::gui
