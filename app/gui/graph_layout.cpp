#include "app/gui/graph_layout.h"

#include <graphviz/gvc.h>

#include <mutex>
#include <string>

namespace kiln::gui {

namespace {

std::mutex& graphvizMutex() {
  static std::mutex m;
  return m;
}

// cgraph takes char* for names and values it never modifies.
char* cstr(const std::string& s) { return const_cast<char*>(s.c_str()); }

void set(void* object, const std::string& name, const std::string& value) {
  agsafeset(object, cstr(name), cstr(value), cstr(std::string()));
}

GraphLayout columnFallback(const std::vector<QSizeF>& sizes, const QString& error) {
  GraphLayout l;
  l.error = error;
  double y = 0;
  for (const QSizeF& s : sizes) {
    l.nodes.emplace_back(QPointF(-s.width() / 2, y), s);
    y += s.height() + 30;
  }
  for (const QRectF& r : l.nodes) l.bounds |= r;
  return l;
}

}  // namespace

GraphLayout layoutGraph(const app::GraphDescription& graph, const std::vector<QSizeF>& sizes) {
  std::lock_guard<std::mutex> lock(graphvizMutex());
  GVC_t* gvc = gvContext();
  if (!gvc) return columnFallback(sizes, QStringLiteral("Graphviz could not start"));
  std::string name = "kiln";
  Agraph_t* g = agopen(cstr(name), Agdirected, nullptr);
  set(g, "rankdir", "TB");
  set(g, "nodesep", "0.35");
  set(g, "ranksep", "0.45");
  set(g, "splines", "spline");

  std::vector<Agnode_t*> nodes;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    std::string id = "n" + std::to_string(i);
    Agnode_t* n = agnode(g, cstr(id), 1);
    set(n, "shape", "box");
    set(n, "fixedsize", "true");
    set(n, "width", std::to_string(sizes[i].width() / 72.0));
    set(n, "height", std::to_string(sizes[i].height() / 72.0));
    set(n, "label", "");
    nodes.push_back(n);
  }
  std::vector<Agedge_t*> edges;
  for (size_t i = 0; i < graph.edges.size(); ++i) {
    std::string id = "e" + std::to_string(i);
    edges.push_back(agedge(g, nodes[graph.edges[i].from], nodes[graph.edges[i].to], cstr(id), 1));
  }

  if (gvLayout(gvc, g, "dot") != 0) {
    agclose(g);
    gvFreeContext(gvc);
    return columnFallback(sizes, QStringLiteral("Graphviz could not lay out the graph"));
  }

  GraphLayout l;
  boxf bb = GD_bb(g);
  auto toScene = [&](pointf p) { return QPointF(p.x - bb.LL.x, bb.UR.y - p.y); };
  for (size_t i = 0; i < nodes.size(); ++i) {
    QPointF c = toScene(ND_coord(nodes[i]));
    double w = ND_width(nodes[i]) * 72, h = ND_height(nodes[i]) * 72;
    l.nodes.emplace_back(c.x() - w / 2, c.y() - h / 2, w, h);
  }
  for (Agedge_t* e : edges) {
    QPainterPath path;
    QPointF tip;
    splines* spl = e ? ED_spl(e) : nullptr;
    if (spl && spl->size > 0) {
      const bezier& bz = spl->list[0];
      if (bz.size > 0) {
        path.moveTo(toScene(bz.list[0]));
        for (int k = 1; k + 2 < bz.size; k += 3)
          path.cubicTo(toScene(bz.list[k]), toScene(bz.list[k + 1]), toScene(bz.list[k + 2]));
        tip = bz.eflag ? toScene(bz.ep) : path.currentPosition();
      }
    }
    l.edges.push_back(path);
    l.arrowTips.push_back(tip);
  }
  l.bounds = QRectF(0, 0, bb.UR.x - bb.LL.x, bb.UR.y - bb.LL.y);
  gvFreeLayout(gvc, g);
  agclose(g);
  gvFreeContext(gvc);
  return l;
}

}  // namespace kiln::gui
