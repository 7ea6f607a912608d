#include "app/gui/graph_view.h"

#include <QGraphicsPathItem>
#include <QGraphicsScene>
#include <QHBoxLayout>
#include <QPainter>
#include <QScrollBar>
#include <QShortcut>
#include <QSplitter>
#include <QStyleOptionGraphicsItem>
#include <QToolButton>
#include <QVBoxLayout>
#include <QWheelEvent>

#include <algorithm>
#include <cmath>
#include <map>

#include "app/gui/format.h"
#include "app/gui/text_view.h"

namespace kiln::gui {

namespace {

QString nodeSubtitle(const app::GraphNode& n) { return qs(n.outputShape); }

bool isCall(const app::GraphNode& n) { return n.kind == app::GraphNodeKind::Call; }

/// An if/loop call: it runs its regions' calls, no kernel of its own.
bool isControl(const app::GraphNode& n) { return !n.regions.empty(); }

/// The calls directly inside `region`.
int callsIn(const app::GraphDescription& g, int region) {
  return static_cast<int>(std::count_if(g.nodes.begin(), g.nodes.end(),
                                        [&](const app::GraphNode& n) { return isCall(n) && n.region == region; }));
}

/// An edge from an if/loop call to an input of one of its regions: a binding, drawn dashed.
bool bindsRegionInput(const app::GraphDescription& g, const app::GraphEdge& e) {
  int region = g.nodes[e.to].region;
  return region >= 0 && g.regions[region].node == e.from;
}

}  // namespace

std::vector<QSizeF> graphNodeSizes(const app::GraphDescription& graph, double charWidth, double lineHeight) {
  std::vector<QSizeF> sizes;
  for (const auto& n : graph.nodes) {
    // Bold titles run ~25% wider than the average glyph of the plain font.
    double chars = std::max(n.title.size() * 1.25, static_cast<double>(n.outputShape.size()));
    double w = std::clamp(chars * charWidth + 28, isCall(n) ? 170.0 : 120.0, 360.0);
    double h = isCall(n) ? 3 * lineHeight + 14 : 2 * lineHeight + 10;
    sizes.emplace_back(w, h);
  }
  return sizes;
}

// One box: a call (rounded rectangle) or a graph input/output (pill).
class GraphNodeItem : public QGraphicsItem {
 public:
  GraphNodeItem(int index, const app::GraphNode& node, const QRectF& rect)
      : m_index(index), m_node(node), m_rect(rect) {
    setFlag(ItemIsSelectable);
    setCursor(Qt::PointingHandCursor);
    setToolTip(QStringLiteral("%1\n%2").arg(qs(node.function), qs(node.kernel)));
  }
  int index() const { return m_index; }
  const app::GraphNode& node() const { return m_node; }
  QRectF boundingRect() const override { return m_rect.adjusted(-4, -4, 4, 4); }
  void setFill(const QColor& c) {
    m_fill = c;
    update();
  }
  void setNote(const QString& note) {
    m_note = note;
    update();
  }
  void setMatched(bool matched) {
    m_matched = matched;
    update();
  }

  void paint(QPainter* p, const QStyleOptionGraphicsItem* option, QWidget*) override {
    p->setRenderHint(QPainter::Antialiasing);
    bool selected = isSelected();
    QPen pen(selected ? QColor(0x1e, 0x63, 0xd6) : m_matched ? QColor(0xe0, 0x9b, 0x00) : QColor(0x70, 0x70, 0x70));
    pen.setWidthF(selected || m_matched ? 2.6 : 1.0);
    p->setPen(pen);
    p->setBrush(m_fill);
    double radius = isCall(m_node) ? 6 : m_rect.height() / 2;
    p->drawRoundedRect(m_rect, radius, radius);

    // Text is skipped when zoomed far out: unreadable anyway, and it keeps panning smooth.
    double lod = option->levelOfDetailFromTransform(p->worldTransform());
    if (lod < 0.35) return;
    QRectF inner = m_rect.adjusted(8, 5, -8, -5);
    QFont bold = p->font();
    bold.setBold(true);
    QFontMetricsF fm(bold);
    p->setFont(bold);
    bool dark = m_fill.lightnessF() < 0.55;
    p->setPen(dark ? Qt::white : Qt::black);
    QString title = fm.elidedText(qs(m_node.title), Qt::ElideRight, inner.width());
    int lines = isCall(m_node) ? 3 : 2;
    double lineH = inner.height() / lines;
    p->drawText(QRectF(inner.left(), inner.top(), inner.width(), lineH), Qt::AlignCenter, title);
    QFont small = p->font();
    small.setBold(false);
    small.setPointSizeF(small.pointSizeF() * 0.9);
    p->setFont(small);
    p->setPen(dark ? QColor(0xf4, 0xf4, 0xf4) : QColor(0x40, 0x40, 0x40));
    QFontMetricsF sm(small);
    p->drawText(QRectF(inner.left(), inner.top() + lineH, inner.width(), lineH), Qt::AlignCenter,
                sm.elidedText(nodeSubtitle(m_node), Qt::ElideMiddle, inner.width()));
    if (lines == 3)
      p->drawText(QRectF(inner.left(), inner.top() + 2 * lineH, inner.width(), lineH), Qt::AlignCenter,
                  sm.elidedText(m_note, Qt::ElideRight, inner.width()));
  }

 private:
  int m_index;
  app::GraphNode m_node;
  QRectF m_rect;
  QColor m_fill = Qt::white;
  QString m_note;
  bool m_matched = false;
};

// The box around one region of an if/loop call, labelled in its top-left corner (where Graphviz
// left room for the label). Translucent, so a region inside another one is a shade darker.
class GraphRegionItem : public QGraphicsItem {
 public:
  GraphRegionItem(const app::GraphRegion& region, const QRectF& rect) : m_label(qs(region.label)), m_rect(rect) {
    setZValue(-2);  // below the edges and the nodes
  }
  QRectF rect() const { return m_rect; }
  QRectF boundingRect() const override { return m_rect.adjusted(-2, -2, 2, 2); }

  void paint(QPainter* p, const QStyleOptionGraphicsItem* option, QWidget*) override {
    p->setRenderHint(QPainter::Antialiasing);
    p->setPen(QPen(QColor(0x8c, 0x7c, 0xc4), 1.2, Qt::DashLine));
    p->setBrush(QColor(0x6a, 0x5a, 0xcd, 20));
    p->drawRoundedRect(m_rect, 8, 8);
    if (option->levelOfDetailFromTransform(p->worldTransform()) < 0.35) return;
    QFont bold = p->font();
    bold.setBold(true);
    p->setFont(bold);
    p->setPen(QColor(0x4a, 0x3a, 0x8a));
    QRectF text = m_rect.adjusted(10, 4, -10, 0);
    p->drawText(text, Qt::AlignLeft | Qt::AlignTop,
                QFontMetricsF(bold).elidedText(m_label, Qt::ElideRight, text.width()));
  }

 private:
  QString m_label;
  QRectF m_rect;
};

GraphCanvas::GraphCanvas(QWidget* parent) : QGraphicsView(parent) {
  setRenderHints(QPainter::Antialiasing | QPainter::TextAntialiasing);
  setDragMode(QGraphicsView::ScrollHandDrag);
  setTransformationAnchor(QGraphicsView::AnchorUnderMouse);
  setViewportUpdateMode(QGraphicsView::BoundingRectViewportUpdate);
  setBackgroundBrush(QColor(0xfa, 0xfa, 0xf8));
}

void GraphCanvas::zoomBy(double factor) {
  double current = transform().m11();
  double target = std::clamp(current * factor, 0.05, 4.0);
  scale(target / current, target / current);
}

void GraphCanvas::fitAll() {
  if (!scene()) return;
  fitInView(scene()->itemsBoundingRect().adjusted(-20, -20, 20, 20), Qt::KeepAspectRatio);
  // A tall network fitted whole is unreadable: start readable at the top instead.
  if (transform().m11() < 0.6) {
    resetTransform();
    scale(0.8, 0.8);
    centerOn(scene()->itemsBoundingRect().center().x(), scene()->itemsBoundingRect().top());
  }
}

void GraphCanvas::wheelEvent(QWheelEvent* event) {
  if (event->modifiers() & Qt::ControlModifier) {
    zoomBy(std::pow(1.0015, event->angleDelta().y()));
    event->accept();
    return;
  }
  QGraphicsView::wheelEvent(event);
}

GraphView::GraphView(QWidget* parent) : QWidget(parent) {
  m_scene = new QGraphicsScene(this);
  m_canvas = new GraphCanvas(this);
  m_canvas->setScene(m_scene);

  m_colorMode = new QComboBox(this);
  m_colorMode->addItem(tr("Colour by kernel"));
  m_colorMode->addItem(tr("Colour by time (heat)"));
  m_colorMode->addItem(tr("Colour by operator"));
  m_colorMode->setToolTip(tr("Kernel: boxes of one colour run the same compiled kernel.\n"
                             "Time: measured median per call (profile first)."));
  m_search = new QLineEdit(this);
  m_search->setPlaceholderText(tr("Search nodes (operator, function, kernel)…"));
  m_search->setClearButtonEnabled(true);
  m_matches = new QLabel(this);
  auto makeButton = [this](const QString& text, const QString& tip) {
    auto* b = new QToolButton(this);
    b->setText(text);
    b->setToolTip(tip);
    b->setAutoRaise(true);
    return b;
  };
  QToolButton* zoomIn = makeButton(QStringLiteral("+"), tr("Zoom in (Ctrl+wheel, +)"));
  QToolButton* zoomOut = makeButton(QStringLiteral("−"), tr("Zoom out (Ctrl+wheel, -)"));
  QToolButton* fit = makeButton(tr("Fit"), tr("Fit the graph to the window (0)"));
  m_legend = new QLabel(this);
  m_legend->setStyleSheet(QStringLiteral("color: #555"));

  auto* bar = new QHBoxLayout;
  bar->addWidget(m_colorMode);
  bar->addWidget(m_search, 1);
  bar->addWidget(m_matches);
  bar->addWidget(zoomOut);
  bar->addWidget(zoomIn);
  bar->addWidget(fit);

  m_details = new QLabel(this);
  m_details->setWordWrap(true);
  m_details->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_details->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  m_details->setText(tr("<i>Click a node to see its operators, shapes, time and code.</i>"));
  m_details->setMinimumHeight(120);
  m_loopIr = new CodeView(this);
  m_llvmIr = new CodeView(this);
  m_asm = new CodeView(this);
  m_codeTabs = new QTabWidget(this);
  m_codeTabs->addTab(m_loopIr, tr("Loop IR"));
  m_codeTabs->addTab(m_llvmIr, tr("LLVM IR"));
  m_codeTabs->addTab(m_asm, tr("Assembly"));
  for (CodeView* v : {m_loopIr, m_llvmIr, m_asm}) v->setPlaceholder(tr("Select a node to see its kernel."));

  auto* side = new QSplitter(Qt::Vertical, this);
  side->addWidget(m_details);
  side->addWidget(m_codeTabs);
  side->setStretchFactor(0, 0);
  side->setStretchFactor(1, 1);
  side->setSizes({200, 400});

  auto* left = new QWidget(this);
  auto* leftLayout = new QVBoxLayout(left);
  leftLayout->setContentsMargins(0, 0, 0, 0);
  leftLayout->addLayout(bar);
  leftLayout->addWidget(m_canvas, 1);
  leftLayout->addWidget(m_legend);

  auto* split = new QSplitter(Qt::Horizontal, this);
  split->addWidget(left);
  split->addWidget(side);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  split->setSizes({560, 440});
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addWidget(split);

  connect(m_colorMode, &QComboBox::currentIndexChanged, this,
          [this](int i) { setColorMode(static_cast<ColorMode>(i)); });
  connect(m_search, &QLineEdit::textChanged, this, [this](const QString& t) { search(t); });
  connect(m_search, &QLineEdit::returnPressed, this, [this] {
    if (m_searchHits.empty()) return;
    m_searchCursor = (m_searchCursor + 1) % static_cast<int>(m_searchHits.size());
    selectNode(m_searchHits[m_searchCursor]);
  });
  connect(zoomIn, &QToolButton::clicked, this, [this] { m_canvas->zoomBy(1.25); });
  connect(zoomOut, &QToolButton::clicked, this, [this] { m_canvas->zoomBy(0.8); });
  connect(fit, &QToolButton::clicked, m_canvas, &GraphCanvas::fitAll);
  for (auto [key, factor] : {std::pair{Qt::Key_Plus, 1.25}, std::pair{Qt::Key_Equal, 1.25}, std::pair{Qt::Key_Minus, 0.8}}) {
    auto* s = new QShortcut(QKeySequence(key), m_canvas, [this, factor = factor] { m_canvas->zoomBy(factor); });
    s->setContext(Qt::WidgetShortcut);
  }
  auto* fitKey = new QShortcut(QKeySequence(Qt::Key_0), m_canvas, [this] { m_canvas->fitAll(); });
  fitKey->setContext(Qt::WidgetShortcut);
  connect(m_scene, &QGraphicsScene::selectionChanged, this, [this] {
    QList<QGraphicsItem*> selected = m_scene->selectedItems();
    if (selected.isEmpty()) return;
    auto* item = static_cast<GraphNodeItem*>(selected.front());
    if (item->index() != m_selected) {
      m_selected = item->index();
      showDetails(m_selected);
    }
  });
  clear(tr("Open a model to see its graph."));
}

void GraphView::clear(const QString& message) {
  m_scene->clear();
  m_items.clear();
  m_regions.clear();
  m_inspection.reset();
  m_selected = -1;
  m_searchHits.clear();
  auto* text = m_scene->addText(message);
  text->setDefaultTextColor(QColor(0x80, 0x80, 0x80));
  QFont f = text->font();
  f.setPointSizeF(f.pointSizeF() * 1.3);
  text->setFont(f);
  m_canvas->resetTransform();
  m_canvas->centerOn(text);
  m_legend->clear();
  m_details->setText(tr("<i>Click a node to see its operators, shapes, time and code.</i>"));
  for (CodeView* v : {m_loopIr, m_llvmIr, m_asm}) v->setPlaceholder(tr("Select a node to see its kernel."));
}

void GraphView::setGraph(std::shared_ptr<const app::Inspection> inspection, const GraphLayout& layout) {
  m_scene->clear();
  m_items.clear();
  m_regions.clear();
  m_selected = -1;
  m_shownKernel.clear();
  m_inspection = std::move(inspection);
  const app::GraphDescription& g = m_inspection->graph;
  QPen edgePen(QColor(0x8a, 0x8a, 0x8a), 1.3);
  QPen bindingPen(QColor(0x8c, 0x7c, 0xc4), 1.1, Qt::DashLine);
  for (size_t r = 0; r < g.regions.size() && r < layout.regions.size(); ++r) {
    auto* item = new GraphRegionItem(g.regions[r], layout.regions[r]);
    m_scene->addItem(item);
    m_regions.push_back(item);
  }
  for (size_t e = 0; e < g.edges.size() && e < layout.edges.size(); ++e) {
    auto* path = m_scene->addPath(layout.edges[e], bindsRegionInput(g, g.edges[e]) ? bindingPen : edgePen);
    path->setToolTip(qs(g.edges[e].shape));
    path->setZValue(-1);
    // Arrow head from the spline's end towards the tip Graphviz reserved for it.
    QPointF base = layout.edges[e].currentPosition(), tip = layout.arrowTips[e];
    QLineF dir(base, tip);
    if (dir.length() > 0.5) {
      QLineF unit = dir.unitVector();
      QPointF d(unit.dx(), unit.dy()), n(-d.y(), d.x());
      QPolygonF head;
      head << tip << tip - d * 8 + n * 4 << tip - d * 8 - n * 4;
      auto* arrow = m_scene->addPolygon(head, QPen(Qt::NoPen), QColor(0x8a, 0x8a, 0x8a));
      arrow->setZValue(-1);
    }
  }
  for (size_t i = 0; i < g.nodes.size() && i < layout.nodes.size(); ++i) {
    auto* item = new GraphNodeItem(static_cast<int>(i), g.nodes[i], layout.nodes[i]);
    m_scene->addItem(item);
    m_items.push_back(item);
  }
  m_scene->setSceneRect(layout.bounds.adjusted(-40, -40, 40, 40));
  recolor();
  m_canvas->fitAll();
  if (!m_search->text().isEmpty()) search(m_search->text());
  int nested = 0;
  for (const app::GraphNode& n : g.nodes) nested += isCall(n) && n.region >= 0;
  QString calls = tr("%n call(s)", nullptr, m_inspection->numCalls);
  if (nested > 0) calls += tr(" (and %n inside if/loop regions)", nullptr, nested);
  m_details->setText(tr("<b>%1</b> — %2, %3 kernels, target <tt>%4</tt>, -O%5<br><i>Click a node for details.</i>")
                         .arg(qs(m_inspection->model))
                         .arg(calls)
                         .arg(m_inspection->numKernels)
                         .arg(qs(m_inspection->targetString))
                         .arg(m_inspection->optLevel));
  for (CodeView* v : {m_loopIr, m_llvmIr, m_asm}) v->setPlaceholder(tr("Select a node to see its kernel."));
}

void GraphView::setProfile(std::optional<profiler::ProfileRecord> profile) {
  m_profile = std::move(profile);
  // Profiling is what makes heat colouring meaningful: switch to it the first time.
  if (m_profile && m_mode == ColorMode::Kernel) {
    m_colorMode->setCurrentIndex(static_cast<int>(ColorMode::Heat));
    return;
  }
  recolor();
  if (m_selected >= 0) showDetails(m_selected);
}

void GraphView::setColorMode(ColorMode mode) {
  m_mode = mode;
  if (m_colorMode->currentIndex() != static_cast<int>(mode)) m_colorMode->setCurrentIndex(static_cast<int>(mode));
  recolor();
}

const profiler::OpRecord* GraphView::recordOfCall(int call) const {
  if (!m_profile || call < 0) return nullptr;
  for (const auto& op : m_profile->ops)
    if (op.index == call) return &op;
  return nullptr;
}

double GraphView::timeOfCall(int call) const {
  const profiler::OpRecord* op = recordOfCall(call);
  return op ? op->timeUs : -1;
}

QRectF GraphView::nodeRect(int node) const {
  if (node < 0 || node >= static_cast<int>(m_items.size())) return {};
  return m_items[node]->sceneBoundingRect().adjusted(4, 4, -4, -4);  // the box without its selection margin
}

QRectF GraphView::regionRect(int region) const {
  if (region < 0 || region >= static_cast<int>(m_regions.size())) return {};
  return m_regions[region]->mapRectToScene(m_regions[region]->rect());
}

void GraphView::recolor() {
  if (!m_inspection) return;
  std::map<std::string, int> kernelIndex, opIndex;
  double maxUs = 0;
  if (m_profile)
    for (const auto& op : m_profile->ops) maxUs = std::max(maxUs, op.timeUs);
  for (GraphNodeItem* item : m_items) {
    const app::GraphNode& n = item->node();
    if (!isCall(n)) {
      item->setFill(QColor(0xdd, 0xe6, 0xf0));
      continue;
    }
    double us = timeOfCall(n.call);
    int inside = 0;
    for (int r : n.regions) inside += callsIn(m_inspection->graph, r);
    item->setNote(us >= 0 ? formatUs(us) + (m_profile && m_profile->sumMs > 0
                                                ? QStringLiteral("  (%1)").arg(formatPercent(us / (m_profile->sumMs * 10)))
                                                : QString())
                  : isControl(n)     ? tr("%n call(s) inside", nullptr, inside)
                  : n.ops.size() > 1 ? tr("%1 ops fused").arg(n.ops.size())
                                     : qs(n.kernel));
    if (isControl(n) && m_mode != ColorMode::Heat) {
      item->setFill(QColor(0xe4, 0xdf, 0xf5));  // the colour of the region boxes, a shade deeper
      continue;
    }
    switch (m_mode) {
      case ColorMode::Kernel:
        item->setFill(groupColor(kernelIndex.emplace(n.kernel, static_cast<int>(kernelIndex.size())).first->second));
        break;
      case ColorMode::OpKind:
        item->setFill(groupColor(
            opIndex.emplace(n.ops.empty() ? n.kernel : n.ops.front(), static_cast<int>(opIndex.size())).first->second));
        break;
      case ColorMode::Heat:
        item->setFill(us >= 0 && maxUs > 0 ? heatColor(us / maxUs) : QColor(0xf0, 0xf0, 0xf0));
        break;
    }
  }
  switch (m_mode) {
    case ColorMode::Kernel:
      m_legend->setText(tr("One colour per compiled kernel: %1 kernels for %2 calls. Ctrl+wheel zooms, drag pans.")
                            .arg(kernelIndex.size())
                            .arg(std::count_if(m_items.begin(), m_items.end(), [](const GraphNodeItem* item) {
                              return isCall(item->node()) && !isControl(item->node());
                            })));
      break;
    case ColorMode::OpKind:
      m_legend->setText(tr("One colour per anchor operator (%1 kinds).").arg(opIndex.size()));
      break;
    case ColorMode::Heat:
      m_legend->setText(m_profile ? tr("Heat: pale = fast, deep red = slowest call (%1). Grey: not profiled.").arg(formatUs(maxUs))
                                  : tr("Heat colouring needs a profile: press Profile (Ctrl+P)."));
      break;
  }
}

int GraphView::search(const QString& text) {
  m_searchHits.clear();
  m_searchCursor = -1;
  for (GraphNodeItem* item : m_items) {
    const app::GraphNode& n = item->node();
    bool hit = !text.isEmpty() && (qs(n.title).contains(text, Qt::CaseInsensitive) ||
                                   qs(n.function).contains(text, Qt::CaseInsensitive) ||
                                   qs(n.kernel).contains(text, Qt::CaseInsensitive) ||
                                   qs(n.key).contains(text, Qt::CaseInsensitive));
    item->setMatched(hit);
    if (hit) m_searchHits.push_back(item->index());
  }
  m_matches->setText(text.isEmpty() ? QString() : tr("%n match(es)", nullptr, static_cast<int>(m_searchHits.size())));
  if (!m_searchHits.empty()) {
    m_searchCursor = 0;
    m_canvas->centerOn(m_items[m_searchHits.front()]);
  }
  return static_cast<int>(m_searchHits.size());
}

void GraphView::selectCall(int call) {
  if (!m_inspection) return;
  int node = m_inspection->graph.nodeOfCall(call);
  if (node >= 0) selectNode(node);
}

void GraphView::selectNode(int node) {
  if (node < 0 || node >= static_cast<int>(m_items.size())) return;
  m_scene->clearSelection();
  m_items[node]->setSelected(true);  // showDetails runs from selectionChanged
  m_canvas->centerOn(m_items[node]);
}

void GraphView::showDetails(int index) {
  const app::GraphDescription& g = m_inspection->graph;
  const app::GraphNode& n = g.nodes[index];
  if (isCall(n)) emit callSelected(n.call);
  QString html = QStringLiteral("<h3 style='margin:0'>%1</h3><table cellspacing=2>").arg(qs(n.title).toHtmlEscaped());
  auto row = [&html](const QString& k, const QString& v) {
    html += QStringLiteral("<tr><td style='color:#666;padding-right:8px'>%1</td><td>%2</td></tr>").arg(k, v);
  };
  if (n.region >= 0) row(tr("Runs in"), qs(g.regions[n.region].label).toHtmlEscaped());
  if (isCall(n)) {
    row(tr("Function"), QStringLiteral("<tt>%1</tt>").arg(qs(n.function).toHtmlEscaped()));
    if (!isControl(n)) row(tr("Kernel"), QStringLiteral("<tt>%1</tt>").arg(qs(n.kernel)));
    row(tr("Operators"), joinOps(n.ops, QStringLiteral(", ")));
    QStringList ins;
    for (const auto& s : n.inputShapes) ins << qs(s);
    row(tr("Inputs"), ins.join(QStringLiteral("<br>")));
  }
  if (isControl(n)) {
    QStringList regions;
    for (int r : n.regions) regions << tr("%1: %n call(s)", nullptr, callsIn(g, r)).arg(qs(g.regions[r].name));
    row(tr("Regions"), regions.join(QStringLiteral(", ")));
  }
  row(tr("Output"), qs(n.outputShape));
  if (!n.location.empty()) row(tr("Source"), qs(n.location));
  if (n.flops > 0)
    row(tr("Work"), formatFlops(n.flops) + QStringLiteral(", ") + formatBytes(n.bytes) +
                        (n.region >= 0 ? tr(" per run") : QString()));
  // A call inside a region is timed over all its runs in an inference (a loop body's
  // iterations, none for the branch not taken): its record's FLOPs count them all.
  if (const profiler::OpRecord* op = recordOfCall(n.call)) {
    QString t = formatUs(op->timeUs);
    if (m_profile->sumMs > 0)
      t += QStringLiteral(" — %1 of all calls").arg(formatPercent(op->timeUs / (m_profile->sumMs * 10)));
    if (op->gflops() > 0) t += QStringLiteral(" — %1 GFLOP/s").arg(op->gflops(), 0, 'f', 1);
    if (n.region >= 0) t += QStringLiteral(" — ") + tr("%n run(s) per inference", nullptr, op->calls);
    row(tr("Median"), t);
  } else if (isCall(n)) {
    row(tr("Median"), tr("<i>not profiled yet</i>"));
  }
  html += QStringLiteral("</table>");
  m_details->setText(html);

  if (!isCall(n) || isControl(n)) {
    QString why = isControl(n) ? tr("An if/loop call runs no kernel of its own: click a call inside its regions.")
                  : n.region >= 0 ? tr("Region inputs and outputs have no kernel.")
                                  : tr("Graph inputs and outputs have no kernel.");
    for (CodeView* v : {m_loopIr, m_llvmIr, m_asm}) v->setPlaceholder(why);
    m_shownKernel.clear();
    return;
  }
  auto loop = m_inspection->loopIrByKernel.find(n.kernel);
  if (loop != m_inspection->loopIrByKernel.end())
    m_loopIr->setText(qs(loop->second));
  else
    m_loopIr->setPlaceholder(tr("No loop IR for %1.").arg(qs(n.kernel)));
  if (m_shownKernel != qs(n.kernel)) {
    m_shownKernel = qs(n.kernel);
    m_llvmIr->setPlaceholder(tr("Generating LLVM IR for %1…").arg(m_shownKernel));
    m_asm->setPlaceholder(tr("Generating assembly for %1…").arg(m_shownKernel));
    emit kernelCodeRequested(m_shownKernel);
  }
}

void GraphView::setKernelCode(const app::KernelCode& code) {
  if (qs(code.kernel) != m_shownKernel) return;  // the user clicked on since
  m_llvmIr->setText(qs(code.llvmIr));
  m_asm->setText(qs(code.assembly));
}

void GraphView::setKernelCodeError(const QString& kernel, const QString& message) {
  if (kernel != m_shownKernel) return;
  m_llvmIr->setPlaceholder(message);
  m_asm->setPlaceholder(message);
}

}  // namespace kiln::gui
