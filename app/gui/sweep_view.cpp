#include "app/gui/sweep_view.h"

#include <QChart>
#include <QChartView>
#include <QHBoxLayout>
#include <QLegendMarker>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QPushButton>
#include <QValueAxis>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

#include "app/gui/chart_util.h"
#include "app/gui/format.h"

namespace kiln::gui {

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
    box->setChecked(b != "torch-compile");
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
  auto* charts = new QHBoxLayout;
  charts->addWidget(m_latency);
  charts->addWidget(m_throughput);
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
  layout->addLayout(charts, 1);
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

void SweepView::setResult(const app::SweepResult& result) {
  m_latencySeries.clear();
  m_throughputSeries.clear();
  auto* latency = new QChart;
  auto* throughput = new QChart;
  latency->setTitle(tr("Latency per batch (lower is better)"));
  throughput->setTitle(tr("Throughput (higher is better)"));

  double minMs = 1e300, maxMs = 0, maxRate = 0;
  QStringList notes;
  for (const std::string& backend : result.backends) {
    auto* l = new QLineSeries;
    auto* t = new QLineSeries;
    for (QLineSeries* s : {l, t}) {
      s->setName(backendLabel(backend));
      QPen pen(backendColor(backend), 2.2);
      s->setPen(pen);
      s->setPointsVisible(true);
      s->setMarkerSize(7);
    }
    for (const auto& m : result.points) {
      if (m.backend != backend) continue;
      if (!m.ok()) {
        notes << tr("%1 at batch %2: %3 (%4)").arg(backendLabel(backend)).arg(m.batch).arg(profiler::statusName(m.status), qs(m.reason));
        continue;
      }
      l->append(static_cast<double>(m.batch), m.timing.medianMs);
      t->append(static_cast<double>(m.batch), m.throughput());
      minMs = std::min(minMs, m.timing.medianMs);
      maxMs = std::max(maxMs, m.timing.medianMs);
      maxRate = std::max(maxRate, m.throughput());
    }
    latency->addSeries(l);
    throughput->addSeries(t);
    m_latencySeries[backend] = l;
    m_throughputSeries[backend] = t;
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
  for (QChart* c : {latency, throughput}) c->legend()->setAlignment(Qt::AlignBottom);
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
