#include "app/gui/sweep_view.h"

#include <QAreaSeries>
#include <QChart>
#include <QChartView>
#include <QCursor>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QPushButton>
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
constexpr QRgb kWarnMark = 0xb71c1c;  // the ring around a point whose processes disagree

/// The band between `lower` and `upper` (one point each per batch) in `color`, translucent; a
/// single point gets a short vertical bar instead (an area needs two).
QAbstractSeries* bandSeries(const QList<QPointF>& lower, const QList<QPointF>& upper, QColor color) {
  color.setAlpha(75);
  if (lower.size() == 1) {
    auto* bar = new QLineSeries;
    *bar << lower.front() << upper.front();
    bar->setPen(QPen(color, 8, Qt::SolidLine, Qt::FlatCap));
    return bar;
  }
  auto* up = new QLineSeries;
  auto* down = new QLineSeries;
  up->append(upper);
  down->append(lower);
  auto* area = new QAreaSeries(up, down);
  area->setBrush(color);
  area->setPen(Qt::NoPen);
  return area;
}
}  // namespace

SweepView::SweepView(QWidget* parent) : QWidget(parent) {
  m_batches = new QLineEdit(QStringLiteral("1,4,16,64"), this);
  m_batches->setToolTip(tr("Batch sizes, comma-separated"));
  m_batches->setMaximumWidth(180);
  m_budget = new QDoubleSpinBox(this);
  m_budget->setRange(1, 3600);
  m_budget->setValue(60);
  m_budget->setSuffix(tr(" s"));
  m_budget->setToolTip(tr("Per backend and batch: a backend over budget stops and its larger batches are skipped"));
  auto* run = new QPushButton(tr("Run sweep"), this);
  m_resume = new QPushButton(tr("Resume"), this);
  m_resumeNote = new QLabel(this);
  m_resumeNote->setStyleSheet(QStringLiteral("color: #666"));
  auto* bar = new QHBoxLayout;
  bar->addWidget(new QLabel(tr("Batches:"), this));
  bar->addWidget(m_batches);
  bar->addSpacing(12);
  bar->addWidget(new QLabel(tr("Backends:"), this));
  for (const std::string& b : app::sweepBackendNames()) {
    auto* box = new QCheckBox(backendLabel(b), this);
    box->setChecked(!b.starts_with("torch-compile"));  // they recompile at every batch size
    m_backendBoxes[b] = box;
    bar->addWidget(box);
  }
  bar->addSpacing(12);
  bar->addWidget(new QLabel(tr("Budget:"), this));
  bar->addWidget(m_budget);
  bar->addStretch(1);
  bar->addWidget(run);

  m_summary = new QLabel(this);
  m_summary->setWordWrap(true);
  m_notes = new QLabel(this);
  m_notes->setWordWrap(true);
  m_notes->setStyleSheet(QStringLiteral("color: #8a4b00"));
  m_latency = new QChartView(this);
  m_throughput = new QChartView(this);
  for (QChartView* v : {m_latency, m_throughput}) v->setRenderHint(QPainter::Antialiasing);
  auto* chartsBox = new QWidget(this);
  auto* charts = new QHBoxLayout(chartsBox);
  charts->setContentsMargins(0, 0, 0, 0);
  charts->addWidget(m_latency);
  charts->addWidget(m_throughput);
  m_points = new SweepPointModel(this);
  m_table = new QTreeView(this);
  m_table->setModel(m_points);
  m_table->setRootIsDecorated(false);
  m_table->setUniformRowHeights(true);
  m_table->setAlternatingRowColors(true);
  m_table->header()->setSectionResizeMode(QHeaderView::ResizeToContents);
  m_table->header()->setStretchLastSection(true);
  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(chartsBox);
  split->addWidget(m_table);
  split->setStretchFactor(0, 4);
  split->setStretchFactor(1, 1);
  split->setSizes({520, 150});
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addLayout(bar);
  // Resume sits under Run sweep, beside the summary: the settings row is full at 1280 px.
  m_resumeNote->setSizePolicy(QSizePolicy::Fixed, QSizePolicy::Preferred);
  m_summary->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);  // wraps in the width left
  auto* summaryRow = new QHBoxLayout;
  summaryRow->addWidget(m_summary, 1);
  summaryRow->addWidget(m_resumeNote);
  summaryRow->addWidget(m_resume);
  layout->addLayout(summaryRow);
  layout->addWidget(split, 1);
  layout->addWidget(m_notes);
  connect(run, &QPushButton::clicked, this, &SweepView::runRequested);
  connect(m_resume, &QPushButton::clicked, this, &SweepView::resumeRequested);
  setUnfinished(std::nullopt);
  clear(tr("No sweep yet: choose batch sizes and backends, then Run sweep (Ctrl+Shift+S)."));
}

QChart* SweepView::latencyChart() const { return m_latency->chart(); }
QChart* SweepView::throughputChart() const { return m_throughput->chart(); }

std::vector<int64_t> SweepView::batches() const {
  std::vector<int64_t> out;
  for (const QString& part : m_batches->text().split(QLatin1Char(','), Qt::SkipEmptyParts)) {
    bool ok = false;
    qlonglong v = part.trimmed().toLongLong(&ok);
    if (ok && v > 0) out.push_back(v);
  }
  return out;
}

std::vector<std::string> SweepView::backends() const {
  std::vector<std::string> out;
  for (const std::string& b : app::sweepBackendNames())
    if (m_backendBoxes.at(b)->isChecked()) out.push_back(b);
  return out;
}

void SweepView::setBatches(const std::vector<int64_t>& batches) {
  QStringList parts;
  for (int64_t b : batches) parts << QString::number(b);
  m_batches->setText(parts.join(QLatin1Char(',')));
}

void SweepView::setBackends(const std::vector<std::string>& backends) {
  for (auto& [name, box] : m_backendBoxes)
    box->setChecked(std::find(backends.begin(), backends.end(), name) != backends.end());
}

void SweepView::setUnfinished(const std::optional<app::UnfinishedSweep>& sweep) {
  m_resume->setEnabled(sweep.has_value());
  if (!sweep) {
    m_resumeNote->clear();
    m_resume->setToolTip(tr("Continue an interrupted sweep of this model: none is stored"));
    return;
  }
  QStringList batches, backends;
  for (int64_t b : sweep->batches) batches << QString::number(b);
  for (const std::string& b : sweep->backends) backends << backendLabel(b);
  int missing = sweep->totalPoints - sweep->storedPoints;
  m_resumeNote->setText(
      tr("Interrupted sweep: %1 of %2 points stored").arg(sweep->storedPoints).arg(sweep->totalPoints));
  m_resume->setToolTip(
      tr("Continue sweep run #%1 (batches %2; %3; %4 threads, -O%5): keeps its %6 stored points "
         "and measures the %7 missing")
          .arg(sweep->runId)
          .arg(batches.join(QStringLiteral(", ")), backends.join(QStringLiteral(", ")))
          .arg(sweep->context.threads)
          .arg(sweep->context.optLevel)
          .arg(sweep->storedPoints)
          .arg(missing));
}

void SweepView::clear(const QString& message) {
  m_latencySeries.clear();
  m_throughputSeries.clear();
  m_latencyBands.clear();
  m_disagreeing.clear();
  m_points->clear();
  m_summary->setText(QStringLiteral("<i>%1</i>").arg(message.toHtmlEscaped()));
  m_notes->clear();
  for (QChartView* v : {m_latency, m_throughput}) {
    auto* chart = new QChart;
    chart->setTitle(v == m_latency ? tr("Latency vs batch size") : tr("Throughput vs batch size"));
    replaceChart(v, chart);
  }
}

QList<QPointF> SweepView::latencyPoints(const std::string& backend) const {
  auto it = m_latencySeries.find(backend);
  return it == m_latencySeries.end() ? QList<QPointF>() : it->second->points();
}

QList<QPointF> SweepView::throughputPoints(const std::string& backend) const {
  auto it = m_throughputSeries.find(backend);
  return it == m_throughputSeries.end() ? QList<QPointF>() : it->second->points();
}

QList<QPointF> SweepView::latencyBandLower(const std::string& backend) const {
  auto it = m_latencyBands.find(backend);
  return it == m_latencyBands.end() ? QList<QPointF>() : it->second.first;
}

QList<QPointF> SweepView::latencyBandUpper(const std::string& backend) const {
  auto it = m_latencyBands.find(backend);
  return it == m_latencyBands.end() ? QList<QPointF>() : it->second.second;
}

QList<QPointF> SweepView::disagreeingPoints() const { return m_disagreeing; }

void SweepView::setResult(const app::SweepResult& result) {
  m_latencySeries.clear();
  m_throughputSeries.clear();
  m_latencyBands.clear();
  m_disagreeing.clear();
  m_points->setResult(result);
  auto* latency = new QChart;
  auto* throughput = new QChart;
  latency->setTitle(tr("Latency per batch (lower is better; band: IQR)"));
  throughput->setTitle(tr("Throughput (higher is better)"));

  // A hovered point shows every number it has (the table's tooltip).
  auto tipOnHover = [this](QXYSeries* series, const std::string& backend) {
    connect(series, &QXYSeries::hovered, this, [this, backend](const QPointF& at, bool state) {
      if (!state) {
        QToolTip::hideText();
        return;
      }
      const profiler::Measurement* nearest = nullptr;
      double best = 1e300;
      for (int r = 0; r < m_points->rowCount(); ++r) {
        QModelIndex i = m_points->index(r, 0);
        if (i.data(SweepPointModel::BackendRole).toString() != qs(backend)) continue;
        auto batch = i.data(SweepPointModel::BatchRole).toLongLong();
        const profiler::Measurement* m = m_points->point(backend, batch);
        if (!m || !m->ok()) continue;  // not on the line
        double d = std::fabs(std::log2(static_cast<double>(batch)) - std::log2(std::max(at.x(), 1e-9)));
        if (d < best) best = d, nearest = m;
      }
      if (nearest) QToolTip::showText(QCursor::pos(), SweepPointModel::toolTip(*nearest), this);
    });
  };

  double minMs = 1e300, maxMs = 0, maxRate = 0;
  QStringList notes;
  std::vector<QAbstractSeries*> latencyBands, throughputBands;
  QList<QPointF> flaggedRate;
  for (const std::string& backend : result.backends) {
    auto* l = new QLineSeries;
    auto* t = new QLineSeries;
    for (QLineSeries* s : {l, t}) {
      s->setName(backendLabel(backend));
      QPen pen(backendColor(backend), 2.2);
      s->setPen(pen);
      s->setPointsVisible(true);
      s->setMarkerSize(7);
      tipOnHover(s, backend);
    }
    QList<QPointF> q1, q3, rateLo, rateHi;
    std::vector<const profiler::Measurement*> points;
    for (const auto& m : result.points)
      if (m.backend == backend) points.push_back(&m);
    std::stable_sort(points.begin(), points.end(),
                     [](const profiler::Measurement* a, const profiler::Measurement* b) { return a->batch < b->batch; });
    for (const profiler::Measurement* p : points) {
      const profiler::Measurement& m = *p;
      if (!m.ok()) {
        notes << tr("%1 at batch %2: %3 (%4)").arg(backendLabel(backend)).arg(m.batch).arg(profiler::statusName(m.status), qs(m.reason));
        continue;
      }
      const profiler::Spread spread = m.spread();
      double batch = static_cast<double>(m.batch);
      l->append(batch, m.timing.medianMs);
      t->append(batch, m.throughput());
      if (spread.q1Ms > 0 && spread.q3Ms >= spread.q1Ms) {
        q1 << QPointF(batch, spread.q1Ms);
        q3 << QPointF(batch, spread.q3Ms);
        rateLo << QPointF(batch, batch * 1000.0 / spread.q3Ms);
        rateHi << QPointF(batch, batch * 1000.0 / spread.q1Ms);
        minMs = std::min(minMs, spread.q1Ms);
        maxMs = std::max(maxMs, spread.q3Ms);
        maxRate = std::max(maxRate, batch * 1000.0 / spread.q1Ms);
      }
      if (spread.processesDisagree) {
        m_disagreeing << QPointF(batch, m.timing.medianMs);
        flaggedRate << QPointF(batch, m.throughput());
        notes << tr("%1 at batch %2: %3").arg(backendLabel(backend)).arg(m.batch).arg(disagreementText(spread));
      }
      minMs = std::min(minMs, m.timing.medianMs);
      maxMs = std::max(maxMs, m.timing.medianMs);
      maxRate = std::max(maxRate, m.throughput());
    }
    if (!q1.isEmpty()) {
      latencyBands.push_back(bandSeries(q1, q3, backendColor(backend)));
      throughputBands.push_back(bandSeries(rateLo, rateHi, backendColor(backend)));
      m_latencyBands[backend] = {q1, q3};
    }
    latency->addSeries(l);
    throughput->addSeries(t);
    m_latencySeries[backend] = l;
    m_throughputSeries[backend] = t;
  }
  // The bands under the lines, without legend entries; the rings for disagreeing points on top.
  for (QAbstractSeries* b : latencyBands) latency->addSeries(b);
  for (QAbstractSeries* b : throughputBands) throughput->addSeries(b);
  auto ring = [](const QList<QPointF>& points) {
    auto* s = new QScatterSeries;
    s->setName(tr("⚠ processes disagree"));
    s->setMarkerShape(QScatterSeries::MarkerShapeCircle);
    s->setMarkerSize(17);
    s->setBrush(Qt::NoBrush);
    s->setPen(QPen(QColor(kWarnMark), 2.2));
    s->append(points);
    return s;
  };
  if (!m_disagreeing.isEmpty()) {
    latency->addSeries(ring(m_disagreeing));
    throughput->addSeries(ring(flaggedRate));
  }

  double minBatch = 1, maxBatch = 1;
  if (!result.batches.empty()) {
    minBatch = static_cast<double>(*std::min_element(result.batches.begin(), result.batches.end()));
    maxBatch = static_cast<double>(*std::max_element(result.batches.begin(), result.batches.end()));
  }
  auto batchAxis = [&] {
    auto* x = new QLogValueAxis;
    x->setBase(2);
    x->setLabelFormat(QStringLiteral("%g"));
    x->setTitleText(tr("batch size"));
    // Padding by a factor keeps the end points off the frame; one batch still gets a range.
    x->setRange(minBatch / 1.4, maxBatch * 1.4);
    x->setMinorTickCount(0);
    return x;
  };
  auto* lx = batchAxis();
  auto* ly = new QLogValueAxis;
  ly->setBase(10);
  ly->setLabelFormat(QStringLiteral("%g"));
  ly->setTitleText(tr("median latency (ms, log)"));
  ly->setMinorTickCount(8);
  if (maxMs > 0) ly->setRange(std::pow(10, std::floor(std::log10(minMs))), std::pow(10, std::ceil(std::log10(maxMs * 1.05))));
  latency->addAxis(lx, Qt::AlignBottom);
  latency->addAxis(ly, Qt::AlignLeft);
  auto* tx = batchAxis();
  auto* ty = new QValueAxis;
  ty->setTitleText(tr("items per second"));
  ty->setRange(0, maxRate > 0 ? maxRate * 1.15 : 1);
  ty->setLabelFormat(QStringLiteral("%.0f"));
  ty->applyNiceNumbers();
  throughput->addAxis(tx, Qt::AlignBottom);
  throughput->addAxis(ty, Qt::AlignLeft);
  for (auto* s : latency->series()) {
    s->attachAxis(lx);
    s->attachAxis(ly);
  }
  for (auto* s : throughput->series()) {
    s->attachAxis(tx);
    s->attachAxis(ty);
  }
  for (QChart* c : {latency, throughput}) {
    c->legend()->setAlignment(Qt::AlignBottom);
    for (QLegendMarker* marker : c->legend()->markers()) {
      if (marker->series()->name().isEmpty()) marker->setVisible(false);  // the bands
      if (marker->series()->type() == QAbstractSeries::SeriesTypeScatter) {  // the rings
        marker->setPen(QPen(QColor(kWarnMark), 2));
        marker->setBrush(Qt::white);
      }
    }
  }
  replaceChart(m_latency, latency);
  replaceChart(m_throughput, throughput);

  QStringList batches;
  for (int64_t b : result.batches) batches << QString::number(b);
  m_summary->setText(tr("<b>%1</b> — batches %2, %3 threads, target <tt>%4</tt>, -O%5, on %6")
                         .arg(qs(result.model), batches.join(QStringLiteral(", ")))
                         .arg(result.context.threads)
                         .arg(qs(result.context.target))
                         .arg(result.context.optLevel)
                         .arg(qs(result.context.cpu)));
  m_notes->setText(notes.join(QLatin1Char('\n')));
}

}  // namespace kiln::gui
