#include "app/gui/roofline_view.h"

#include <QChart>
#include <QChartView>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QPainter>
#include <QScatterSeries>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <map>

#include "app/gui/chart_util.h"
#include "app/gui/format.h"

namespace kiln::gui {

namespace {

const QColor kMemoryBound(0x1f, 0x77, 0xb4);
const QColor kComputeBound(0xff, 0x7f, 0x0e);
const QColor kOlder(0x99, 0x99, 0x99);

/// Without measured ceilings the points still have an intensity and a GFLOP/s.
profiler::MachineCeilings placeholderCeilings() {
  profiler::MachineCeilings c;
  c.bandwidth = {profiler::BandwidthCeiling{"DRAM", 0, 0, 0}};
  return c;
}

std::vector<profiler::RooflinePoint> placed(const profiler::ProfileRecord& profile,
                                            const std::optional<profiler::MachineCeilings>& ceilings) {
  std::vector<profiler::RooflinePoint> out;
  for (const auto& p : profiler::rooflineOf(profile, ceilings ? *ceilings : placeholderCeilings()))
    if (p.flops > 0 && p.bytes > 0 && p.gflops > 0) out.push_back(p);
  return out;
}

/// 6 to 36 px, even sizes only (a few series instead of one per call).
int markerSize(double percentOfTime) {
  return 2 * static_cast<int>(std::lround((6 + 30 * std::sqrt(std::clamp(percentOfTime / 100, 0.0, 1.0))) / 2));
}

QString pointText(const profiler::RooflinePoint& p, bool haveCeilings) {
  QString text = QStringLiteral("<b>#%1 %2</b> — %3 FLOPs/byte, %4 GFLOP/s, %5 of the time")
                     .arg(p.call)
                     .arg(joinOps(p.ops, QStringLiteral("+")).toHtmlEscaped())
                     .arg(p.intensity, 0, 'g', 3)
                     .arg(p.gflops, 0, 'f', 2)
                     .arg(formatPercent(p.percentOfTime));
  if (haveCeilings)
    text += QStringLiteral("; data in %1 (%2 GB/s): bound %3 GFLOP/s, <b>%4 of it</b>, %5-bound")
                .arg(qs(p.level))
                .arg(p.bandwidth, 0, 'f', 1)
                .arg(p.boundGflops, 0, 'f', 1)
                .arg(formatPercent(p.percentOfBound))
                .arg(p.memoryBound ? QStringLiteral("memory") : QStringLiteral("compute"));
  return text;
}

}  // namespace

RooflineView::RooflineView(QWidget* parent) : QWidget(parent) {
  m_header = new QLabel(this);
  m_header->setTextFormat(Qt::RichText);
  m_header->setWordWrap(true);
  m_detail = new QLabel(this);
  m_detail->setTextFormat(Qt::RichText);
  m_detail->setWordWrap(true);
  m_chartView = new QChartView(this);
  m_chartView->setRenderHint(QPainter::Antialiasing);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addWidget(m_header);
  layout->addWidget(m_chartView, 1);
  layout->addWidget(m_detail);
  clear(tr("No profile yet: press Profile (Ctrl+P); its calls are placed against the machine's ceilings "
           "(measured once per thread count, a second or two)."));
}

QChart* RooflineView::chart() const { return m_chartView->chart(); }

int RooflineView::arrowCount() const { return m_arrowCount; }

void RooflineView::clear(const QString& message) {
  m_points.clear();
  m_callSeries.clear();
  m_markerSizes.clear();
  m_arrowCount = 0;
  m_selectedCall = -1;
  m_comparison = false;
  m_header->setText(QStringLiteral("<i>%1</i>").arg(message.toHtmlEscaped()));
  m_detail->clear();
  auto* chart = new QChart;
  chart->setTitle(tr("Roofline"));
  chart->legend()->hide();
  replaceChart(m_chartView, chart);
}

void RooflineView::setProfile(const profiler::ProfileRecord& profile,
                              const std::optional<profiler::MachineCeilings>& ceilings, const QString& title) {
  m_comparison = false;
  m_points = placed(profile, ceilings);
  QString header = QStringLiteral("<b>%1</b> — %2 of %3 calls have FLOPs and are placed; dot area = share of the time.")
                       .arg(title.toHtmlEscaped())
                       .arg(m_points.size())
                       .arg(profile.ops.size());
  if (ceilings) {
    header += tr(" Ceilings: %1 threads, measured %2.").arg(ceilings->threads).arg(qs(ceilings->measuredAt));
  } else {
    header += tr(" <i>No ceilings measured for this machine and thread count: profile again to measure them.</i>");
  }
  m_header->setText(header);
  draw({}, ceilings, title);
}

void RooflineView::setComparison(const app::BuildDiff& diff) {
  m_comparison = true;
  std::optional<profiler::MachineCeilings> ceilings = diff.ceilingsB ? diff.ceilingsB : diff.ceilingsA;
  std::vector<profiler::RooflinePoint> before = placed(diff.profileA, ceilings);
  m_points = placed(diff.profileB, ceilings);
  auto describe = [](const profiler::BuildRecord& b) {
    return QStringLiteral("-O%1 %2, %3 threads").arg(b.optLevel).arg(qs(b.target)).arg(b.threads);
  };
  m_header->setText(tr("<b>A</b> = build #%1 (%2, grey) → <b>B</b> = build #%3 (%4, coloured): a line from each "
                       "call's A point to its B point.%5")
                        .arg(diff.buildA)
                        .arg(describe(diff.a))
                        .arg(diff.buildB)
                        .arg(describe(diff.b))
                        .arg(ceilings ? QString() : tr(" <i>No ceilings stored with these profiles.</i>")));
  draw(before, ceilings, tr("Roofline: build #%1 → #%2").arg(diff.buildA).arg(diff.buildB));
}

void RooflineView::draw(const std::vector<profiler::RooflinePoint>& previous,
                        const std::optional<profiler::MachineCeilings>& ceilings, const QString& title) {
  m_selectedCall = -1;
  m_callSeries.clear();  // owned by the chart this one replaces
  m_detail->setText(m_points.empty() ? tr("No call with FLOPs to place.")
                                     : tr("Click a dot for its numbers%1.")
                                           .arg(m_comparison ? QString() : tr(" (it is selected in the Profile and Graph views)")));
  auto* chart = new QChart;
  chart->setTitle(title);
  chart->legend()->setAlignment(Qt::AlignRight);

  // Axis ranges in whole decades around the dots, the ridge points and the peak.
  std::vector<std::pair<double, double>> xy;
  for (const auto& p : m_points) xy.emplace_back(p.intensity, p.gflops);
  for (const auto& p : previous) xy.emplace_back(p.intensity, p.gflops);
  std::vector<double> bandwidths;
  if (ceilings)
    for (const auto& b : ceilings->bandwidth) bandwidths.push_back(b.gbPerSecond);
  profiler::RooflineAxes axes = profiler::rooflineAxes(xy, ceilings ? ceilings->peakGflops : 0, bandwidths);
  double xMin = axes.xMin(), xMax = axes.xMax(), yMin = axes.yMin(), yMax = axes.yMax();
  auto* x = new QLogValueAxis;
  x->setBase(10);
  x->setLabelFormat(QStringLiteral("%g"));
  x->setTitleText(tr("arithmetic intensity (FLOPs / byte moved)"));
  x->setRange(xMin, xMax);
  x->setMinorTickCount(-1);
  auto* y = new QLogValueAxis;
  y->setBase(10);
  y->setLabelFormat(QStringLiteral("%g"));
  y->setTitleText(tr("GFLOP/s"));
  y->setRange(yMin, yMax);
  y->setMinorTickCount(-1);
  chart->addAxis(x, Qt::AlignBottom);
  chart->addAxis(y, Qt::AlignLeft);
  auto attach = [&](QAbstractSeries* s) {
    chart->addSeries(s);
    s->attachAxis(x);
    s->attachAxis(y);
  };

  if (ceilings && ceilings->peakGflops > 0) {
    const QColor colors[] = {QColor(0x2c, 0xa0, 0x2c), QColor(0x94, 0x67, 0xbd), QColor(0x8c, 0x56, 0x4b),
                             QColor(0x17, 0xbe, 0xcf), QColor(0x7f, 0x7f, 0x7f)};
    double firstRidge = xMax;
    int i = 0;
    for (const auto& b : ceilings->bandwidth) {
      if (!(b.gbPerSecond > 0)) continue;
      double ridge = ceilings->peakGflops / b.gbPerSecond;
      firstRidge = std::min(firstRidge, ridge);
      double start = std::max(xMin, yMin / b.gbPerSecond);
      auto* line = new QLineSeries;
      line->setName(QStringLiteral("%1 %2 GB/s").arg(qs(b.level)).arg(b.gbPerSecond, 0, 'f', 1));
      line->append(start, start * b.gbPerSecond);
      line->append(ridge, ceilings->peakGflops);
      QPen pen(colors[i++ % 5], 2);
      line->setPen(pen);
      attach(line);
    }
    auto* peak = new QLineSeries;
    peak->setName(tr("FMA peak %1 GFLOP/s").arg(ceilings->peakGflops, 0, 'f', 1));
    peak->append(std::max(xMin, firstRidge), ceilings->peakGflops);
    peak->append(xMax, ceilings->peakGflops);
    peak->setPen(QPen(QColor(0xd6, 0x27, 0x28), 2.5));
    attach(peak);
  }

  // The arrows: a line per call from its A point to its B point, in data coordinates (so Qt
  // Charts keeps them on the dots whatever the layout), under the dots, out of the legend.
  std::map<std::string, const profiler::RooflinePoint*> before;
  for (const auto& p : previous) before[p.key] = &p;
  m_arrowCount = 0;
  for (const auto& p : m_points) {
    auto it = before.find(p.key);
    if (it == before.end()) continue;
    auto* arrow = new QLineSeries;
    arrow->append(it->second->intensity, it->second->gflops);
    arrow->append(p.intensity, p.gflops);
    arrow->setPen(QPen(QColor(0x44, 0x44, 0x44, 170), 1.2));
    attach(arrow);
    for (QLegendMarker* marker : chart->legend()->markers(arrow)) marker->setVisible(false);
    ++m_arrowCount;
  }
  // Dots: one scatter series per marker size and colour (Qt 6.4 misplaces markers given a size
  // per point, so sizes come from the series), the legend naming only the first of each kind.
  std::map<std::pair<int, QRgb>, QScatterSeries*> bySize;
  std::map<QRgb, bool> named;
  auto seriesFor = [&](int size, QColor colour, const QString& name, bool calls) {
    auto key = std::pair{size, colour.rgba()};
    if (auto it = bySize.find(key); it != bySize.end()) return it->second;
    auto* s = new QScatterSeries;
    s->setName(name);
    s->setMarkerShape(QScatterSeries::MarkerShapeCircle);
    s->setMarkerSize(size);
    s->setColor(colour);
    s->setBorderColor(QColor(0x33, 0x33, 0x33));
    attach(s);
    bool first = !named[colour.rgba()];
    named[colour.rgba()] = true;
    if (!first)
      for (QLegendMarker* marker : chart->legend()->markers(s)) marker->setVisible(false);
    if (calls) {
      m_callSeries.push_back(s);
      connect(s, &QScatterSeries::clicked, this, &RooflineView::pick);
    }
    bySize[key] = s;
    return s;
  };
  QColor older(kOlder.red(), kOlder.green(), kOlder.blue(), 140);
  for (const auto& p : previous)
    seriesFor(markerSize(p.percentOfTime), older, tr("A (older build)"), false)->append(p.intensity, p.gflops);
  m_markerSizes.clear();
  for (const auto& p : m_points) {
    bool compute = ceilings && !p.memoryBound;
    QColor c = compute ? kComputeBound : kMemoryBound;
    c.setAlpha(150);
    QString name = !ceilings ? tr("calls") : compute ? tr("compute-bound") : tr("memory-bound");
    if (m_comparison) name = tr("B: %1").arg(name);
    int size = markerSize(p.percentOfTime);
    seriesFor(size, c, name, true)->append(p.intensity, p.gflops);
    m_markerSizes.push_back(size);
  }

  replaceChart(m_chartView, chart);
}

void RooflineView::pick(const QPointF& at) {
  if (m_points.empty()) return;
  // The nearest dot on the log-log axes.
  size_t best = 0;
  double bestDistance = INFINITY;
  for (size_t i = 0; i < m_points.size(); ++i) {
    double dx = std::log10(m_points[i].intensity) - std::log10(std::max(at.x(), 1e-30));
    double dy = std::log10(m_points[i].gflops) - std::log10(std::max(at.y(), 1e-30));
    double d = dx * dx + dy * dy;
    if (d < bestDistance) {
      bestDistance = d;
      best = i;
    }
  }
  const profiler::RooflinePoint& p = m_points[best];
  m_selectedCall = p.call;
  bool haveCeilings = p.bandwidth > 0;
  m_detail->setText(pointText(p, haveCeilings));
  if (!m_comparison) emit callActivated(p.call);
}

}  // namespace kiln::gui
