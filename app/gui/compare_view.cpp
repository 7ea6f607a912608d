#include "app/gui/compare_view.h"

#include <QAreaSeries>
#include <QBarCategoryAxis>
#include <QChart>
#include <QChartView>
#include <QCursor>
#include <QGraphicsSimpleTextItem>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QScatterSeries>
#include <QSplitter>
#include <QToolTip>
#include <QValueAxis>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

#include "app/gui/chart_util.h"
#include "app/gui/format.h"

namespace kiln::gui {

namespace {
constexpr double kBarHalfWidth = 0.275;  // in category units
constexpr double kBoxHalfWidth = 0.07;   // the IQR box
constexpr double kCapHalfWidth = 0.05;   // the min–max whisker's caps
constexpr double kDotOffset = 0.17;      // the per-process medians, right of the whisker
constexpr QRgb kSpreadInk = 0x303030;
constexpr QRgb kWarnInk = 0xb45309;  // a disagreeing bar's label (the table's ⚠ colour)
constexpr QRgb kWarnMark = 0xb71c1c;  // its process dots: dark red shows on every bar colour

/// A filled rectangle from `lo` to `hi` over [x0, x1] (a bar or a box: QAreaSeries, so each one
/// has its own colour and works on a log axis).
QAreaSeries* rectSeries(double x0, double x1, double lo, double hi) {
  auto* upper = new QLineSeries;
  auto* lower = new QLineSeries;
  *upper << QPointF(x0, hi) << QPointF(x1, hi);
  *lower << QPointF(x0, lo) << QPointF(x1, lo);
  return new QAreaSeries(upper, lower);
}
}  // namespace

CompareView::CompareView(QWidget* parent) : QWidget(parent) {
  m_summary = new QLabel(this);
  m_summary->setWordWrap(true);
  m_torchCompile = new QCheckBox(tr("Also try torch.compile (a Python worker, slow to start)"), this);
  m_logScale = new QCheckBox(tr("Log scale"), this);
  m_logScale->setToolTip(tr("A logarithmic latency axis: bars of very different heights stay readable"));
  m_chartView = new QChartView(this);
  m_chartView->setRenderHint(QPainter::Antialiasing);
  m_model = new CompareTableModel(this);
  m_table = new QTreeView(this);
  m_table->setModel(m_model);
  m_table->setRootIsDecorated(false);
  m_table->setUniformRowHeights(true);
  m_table->setAlternatingRowColors(true);
  m_table->header()->setSectionResizeMode(QHeaderView::ResizeToContents);
  m_table->header()->setStretchLastSection(true);
  m_table->setMaximumHeight(190);
  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(m_chartView);
  split->addWidget(m_table);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 1);
  auto* options = new QHBoxLayout;
  options->addWidget(m_torchCompile);
  options->addSpacing(16);
  options->addWidget(m_logScale);
  options->addStretch(1);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addWidget(m_summary);
  layout->addLayout(options);
  layout->addWidget(split, 1);
  connect(m_logScale, &QCheckBox::toggled, this, [this] {
    if (!m_bars.empty()) rebuild();
  });
  clear(tr("No comparison yet: press Compare (Ctrl+R) to time PyTorch and Kiln on the same input."));
}

QChart* CompareView::chart() const { return m_chartView->chart(); }

void CompareView::clear(const QString& message) {
  m_bars.clear();
  m_unavailable.clear();
  m_labels.clear();
  m_labelAt.clear();
  m_eagerMs = 0;
  m_model->clear();
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
  size_t repeats = 0, processes = static_cast<size_t>(std::max(1, result.processes));
  for (const auto& r : result.backends) {
    Bar bar{r.backend == "kiln" ? kilnLabel : backendLabel(r), r.backend, r};
    if (!r.available) {
      m_unavailable.push_back(bar);
      continue;
    }
    repeats = std::max(repeats, r.timing.samplesMs.size());
    processes = std::max(processes, r.processMedianMs.size());  // a stored run does not say
    if (r.backend == "pytorch-eager") m_eagerMs = r.timing.medianMs;
    if (r.backend == "kiln") kiln.push_back(bar);
    else m_bars.push_back(bar);
  }
  m_bars.insert(m_bars.end(), kiln.begin(), kiln.end());
  QString spread = processes > 1 ? tr("Bars: median of %1 repeats in %2 worker processes per backend; box: IQR "
                                      "(q1–q3); whiskers: min–max (without a cap: cut short, see the table); dots: "
                                      "each process's median; ⚠: the processes' medians differ by more than 10 %.")
                                       .arg(repeats)
                                       .arg(processes)
                                 : tr("Bars: median of %1 repeats; box: IQR (q1–q3); whiskers: min–max (without a cap: cut short, "
                                      "see the table).")
                                       .arg(repeats);
  if (result.parkTimeouts > 0)
    spread += tr(" %1 repeats began while another backend's threads were still running.").arg(result.parkTimeouts);
  if (result.placementChanged) {
    auto [lo, hi] = std::minmax_element(result.coreRoundTripNs.begin(), result.coreRoundTripNs.end());
    spread += tr(" ⚠ The host moved this machine's CPUs during the run (core-to-core round trip %1–%2 ns): "
                 "multi-threaded timings before and after the move differ.")
                  .arg(*lo, 0, 'f', 0)
                  .arg(*hi, 0, 'f', 0);
  }
  m_summary->setText(tr("<b>%1</b>, batch %2, %3 threads on %4 — target <tt>%5</tt>; libtorch %6 with %7 (TorchScript "
                        "optimized; every row's versions and threads are in its tooltip). %8")
                         .arg(qs(result.model).toHtmlEscaped())
                         .arg(result.batch)
                         .arg(result.threads)
                         .arg(qs(result.cpu).toHtmlEscaped(), qs(result.target).toHtmlEscaped(),
                              qs(result.torchVersion).toHtmlEscaped(), qs(result.blas).toHtmlEscaped(),
                              spread.toHtmlEscaped()));
  rebuild();
}

QString CompareView::summaryText() const { return m_summary->text(); }

QString CompareView::barLabel(size_t i) const {
  if (i >= m_bars.size()) return {};
  const profiler::Spread s = m_bars[i].result.spread();
  QString text = formatMs(s.medianMs);
  // A row that computes something else has no speed-up to show.
  if (m_bars[i].result.outputsDiffer())
    text += tr("\n✗ outputs differ from eager's");
  else if (m_eagerMs > 0 && s.medianMs > 0 && m_bars[i].backend != "pytorch-eager")
    text += QStringLiteral("\n%1× vs eager").arg(m_eagerMs / s.medianMs, 0, 'f', 2);
  if (s.processesDisagree) text += tr("\n⚠ processes disagree");
  return text;
}

void CompareView::rebuild() {
  std::vector<Bar> rows = m_bars;
  rows.insert(rows.end(), m_unavailable.begin(), m_unavailable.end());
  m_model->setRows(std::move(rows));

  auto* chart = new QChart;
  chart->setTitle(logScale() ? tr("Latency per inference (lower is better; log scale)")
                             : tr("Latency per inference (lower is better)"));
  chart->legend()->hide();
  chart->setMargins(QMargins(8, 8, 8, 8));

  // The axes first: the bars start at the bottom of the value axis (0, or the log axis' floor).
  const bool log = logScale();
  QStringList categories;
  double top = 0, bottom = 1e300;
  m_labelAt.assign(m_bars.size(), 0);
  std::vector<profiler::Spread> spreads;
  for (const Bar& bar : m_bars) spreads.push_back(bar.result.spread());
  for (size_t i = 0; i < m_bars.size(); ++i) {
    const profiler::Spread& s = spreads[i];
    QString category = s.processesDisagree ? QStringLiteral("⚠ ") + m_bars[i].label : m_bars[i].label;
    categories << (m_bars[i].result.outputsDiffer() ? QStringLiteral("✗ ") + category : category);
    // On a linear axis one wild outlier (a loaded machine) must not squash every bar: whiskers
    // are clipped at 2.5× their median (never inside the box or below a process's median); the
    // table keeps the real maximum. A log axis shows it.
    double hi = std::max(s.maxMs, s.medianMs);
    if (!log) {
      double keep = std::max(2.5 * s.medianMs, s.q3Ms);
      for (double p : s.processMedianMs) keep = std::max(keep, p);
      hi = std::min(hi, keep);
    }
    m_labelAt[i] = hi;
    top = std::max(top, hi);
    double lo = s.minMs > 0 ? std::min(s.minMs, s.medianMs) : s.medianMs;
    if (lo > 0) bottom = std::min(bottom, lo);
  }
  auto* x = new QBarCategoryAxis;
  x->append(categories);
  chart->addAxis(x, Qt::AlignBottom);
  QAbstractAxis* y = nullptr;
  double base = 0;
  if (log) {
    auto* axis = new QLogValueAxis;
    axis->setBase(10);
    axis->setLabelFormat(QStringLiteral("%g"));
    axis->setMinorTickCount(8);
    axis->setTitleText(tr("milliseconds (log)"));
    // Whole decades, so that at least two labelled ticks show; headroom for the labels above.
    double lo = bottom < 1e300 ? std::pow(10, std::floor(std::log10(bottom * 0.9))) : 0.1;
    double hi = top > 0 ? std::pow(10, std::ceil(std::log10(top * 1.8))) : 10;
    axis->setRange(lo, std::max(hi, lo * 10));
    base = axis->min();
    y = axis;
  } else {
    auto* axis = new QValueAxis;
    axis->setRange(0, top > 0 ? top * 1.3 : 1);  // headroom for the labels above the whiskers
    axis->setTitleText(tr("milliseconds"));
    axis->setLabelFormat(top * 1.3 >= 20 ? QStringLiteral("%.0f") : QStringLiteral("%.2f"));
    axis->applyNiceNumbers();
    y = axis;
  }
  chart->addAxis(y, Qt::AlignLeft);
  auto attach = [&](QAbstractSeries* s) {
    chart->addSeries(s);
    s->attachAxis(x);
    s->attachAxis(y);
  };

  for (size_t i = 0; i < m_bars.size(); ++i) {
    const profiler::Spread& s = spreads[i];
    double cx = static_cast<double>(i);
    // The bar, at the median.
    QAreaSeries* bar = rectSeries(cx - kBarHalfWidth, cx + kBarHalfWidth, base, s.medianMs);
    QColor c = backendColor(m_bars[i].backend);
    bar->setBrush(c);
    bar->setPen(QPen(s.processesDisagree ? QColor(kWarnInk) : c.darker(115), s.processesDisagree ? 2.0 : 1.0));
    attach(bar);
    connect(bar, &QAreaSeries::hovered, this, [this, i](const QPointF&, bool state) {
      if (state) QToolTip::showText(QCursor::pos(), m_model->toolTip(static_cast<int>(i)), m_chartView);
      else QToolTip::hideText();
    });

    // Min–max: an I-beam; a whisker cut short of its maximum has no cap at the top.
    double wMin = log ? std::max(s.minMs, base) : s.minMs, wMax = std::min(s.maxMs, m_labelAt[i]);
    auto* whisker = new QLineSeries;
    *whisker << QPointF(cx - kCapHalfWidth, wMin) << QPointF(cx + kCapHalfWidth, wMin) << QPointF(cx, wMin)
             << QPointF(cx, wMax);
    if (wMax >= s.maxMs) *whisker << QPointF(cx - kCapHalfWidth, wMax) << QPointF(cx + kCapHalfWidth, wMax);
    whisker->setPen(QPen(QColor(kSpreadInk), 1.3));
    attach(whisker);

    // The interquartile range: a box on the whisker.
    if (s.q3Ms > 0 && s.q3Ms >= s.q1Ms) {
      QAreaSeries* box = rectSeries(cx - kBoxHalfWidth, cx + kBoxHalfWidth, std::max(s.q1Ms, base), s.q3Ms);
      box->setBrush(QColor(0x30, 0x30, 0x30, 55));  // darkens the bar, greys the space above it
      box->setPen(QPen(QColor(kSpreadInk), 1.3));
      attach(box);
    }

    // Each worker process's median: they should lie on top of each other.
    if (s.processMedianMs.size() > 1) {
      auto* dots = new QScatterSeries;
      dots->setMarkerShape(QScatterSeries::MarkerShapeCircle);
      dots->setMarkerSize(s.processesDisagree ? 10 : 7);
      dots->setColor(s.processesDisagree ? QColor(kWarnMark) : QColor(255, 255, 255));
      dots->setBorderColor(s.processesDisagree ? QColor(255, 255, 255) : QColor(kSpreadInk));
      for (double p : s.processMedianMs) *dots << QPointF(cx + kDotOffset, std::max(p, base));
      attach(dots);
    }
  }

  m_labels.clear();
  for (size_t i = 0; i < m_bars.size(); ++i) {
    auto* label = new QGraphicsSimpleTextItem(barLabel(i), chart);
    QFont f = label->font();
    f.setBold(m_bars[i].backend == "kiln");
    label->setFont(f);
    if (spreads[i].processesDisagree) label->setBrush(QColor(kWarnInk));
    if (m_bars[i].result.outputsDiffer()) label->setBrush(QColor(kFailedText));
    label->setZValue(100);  // above the grid lines
    m_labels.push_back(label);
  }
  connect(chart, &QChart::plotAreaChanged, this, [this] { placeLabels(); });
  replaceChart(m_chartView, chart);
  placeLabels();
}

void CompareView::placeLabels() {
  QChart* chart = m_chartView->chart();
  if (!chart || chart->series().isEmpty()) return;
  QAbstractSeries* series = chart->series().front();
  for (size_t i = 0; i < m_labels.size() && i < m_labelAt.size(); ++i) {
    QPointF top = chart->mapToPosition(QPointF(static_cast<double>(i), m_labelAt[i]), series);
    QRectF r = m_labels[i]->boundingRect();
    m_labels[i]->setPos(top.x() - r.width() / 2, std::max(chart->plotArea().top(), top.y() - r.height() - 4));
  }
}

}  // namespace kiln::gui
