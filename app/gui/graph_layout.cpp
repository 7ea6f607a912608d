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

GraphLayout columnFallback(const app::GraphDescription& graph, const std::vector<QSizeF>& sizes, const QString& error) {
  GraphLayout l;
  l.error = error;
  double y = 0;
  for (const QSizeF& s : sizes) {
    l.nodes.emplace_back(QPointF(-s.width() / 2, y), s);
    y += s.height() + 30;
  }
  for (const QRectF& r : l.nodes) l.bounds |= r;
  // A region's box holds its nodes and the boxes of the regions inside it (which come later).
  l.regions.resize(graph.regions.size());
  for (size_t i = 0; i < graph.nodes.size() && i < l.nodes.size(); ++i)
    if (graph.nodes[i].region >= 0) l.regions[graph.nodes[i].region] |= l.nodes[i].adjusted(-10, -10, 10, 10);
  for (size_t r = graph.regions.size(); r-- > 0;)
    if (graph.regions[r].parent >= 0) l.regions[graph.regions[r].parent] |= l.regions[r].adjusted(-10, -10, 10, 10);
  return l;
}

// One cluster per region, inside its parent region's cluster; regions come after their parent.
std::vector<Agraph_t*> addClusters(Agraph_t* g, const app::GraphDescription& graph) {
  std::vector<Agraph_t*> clusters;
  for (size_t r = 0; r < graph.regions.size(); ++r) {
    const app::GraphRegion& region = graph.regions[r];
    std::string id = "cluster_" + std::to_string(r);
    Agraph_t* sub = agsubg(region.parent < 0 ? g : clusters.at(region.parent), cstr(id), 1);
    // The Workbench draws the label; Graphviz only reserves room for it (Helvetica 12 is about
    // as wide as the view's label font).
    set(sub, "label", region.label);
    set(sub, "labeljust", "l");
    set(sub, "labelloc", "t");
    set(sub, "fontname", "Helvetica");
    set(sub, "fontsize", "12");
    set(sub, "margin", "12");
    clusters.push_back(sub);
  }
  return clusters;
}

// An if/loop call's successors run after its regions: invisible edges from each region's
// outputs to them rank them below the clusters instead of beside them.
void addRankingEdges(Agraph_t* g, const app::GraphDescription& graph, const std::vector<Agnode_t*>& nodes) {
  int count = 0;
  for (size_t r = 0; r < graph.regions.size(); ++r) {
    int control = graph.regions[r].node;
    std::vector<int> successors;  // of the call, its regions' inputs aside
    for (const app::GraphEdge& e : graph.edges) {
      int region = graph.nodes[e.to].region;
      if (e.from == control && (region < 0 || graph.regions[region].node != control)) successors.push_back(e.to);
    }
    for (size_t i = 0; i < graph.nodes.size(); ++i) {
      if (graph.nodes[i].region != static_cast<int>(r) || graph.nodes[i].kind != app::GraphNodeKind::Output) continue;
      for (int to : successors) {
        std::string id = "rank" + std::to_string(count++);
        set(agedge(g, nodes[i], nodes[to], cstr(id), 1), "style", "invis");
      }
    }
  }
}

// A region's inputs in one row at its top, its outputs in one row (the lowest they need), each
// in the region's order: an invisible edge within a rank puts its tail left of its head. (Such
// an edge between an if's then and else clusters does not order them: dot places clusters as
// wholes, so which side each takes is its crossing minimization's choice.)
void alignRegionBoundaries(Agraph_t* g, const app::GraphDescription& graph, const std::vector<Agraph_t*>& clusters,
                           const std::vector<Agnode_t*>& nodes) {
  int count = 0;
  for (size_t r = 0; r < clusters.size(); ++r) {
    for (app::GraphNodeKind kind : {app::GraphNodeKind::Input, app::GraphNodeKind::Output}) {
      std::string id = (kind == app::GraphNodeKind::Input ? "inputs_" : "outputs_") + std::to_string(r);
      Agraph_t* row = agsubg(clusters[r], cstr(id), 1);
      set(row, "rank", "same");
      Agnode_t* previous = nullptr;
      for (size_t i = 0; i < graph.nodes.size(); ++i) {
        if (graph.nodes[i].region != static_cast<int>(r) || graph.nodes[i].kind != kind) continue;
        agsubnode(row, nodes[i], 1);
        if (previous) {
          std::string edge = "order" + std::to_string(count++);
          set(agedge(g, previous, nodes[i], cstr(edge), 1), "style", "invis");
        }
        previous = nodes[i];
      }
    }
  }
}

}  // namespace

GraphLayout layoutGraph(const app::GraphDescription& graph, const std::vector<QSizeF>& sizes) {
  std::lock_guard<std::mutex> lock(graphvizMutex());
  GVC_t* gvc = gvContext();
  if (!gvc) return columnFallback(graph, sizes, QStringLiteral("Graphviz could not start"));
  std::string name = "kiln";
  Agraph_t* g = agopen(cstr(name), Agdirected, nullptr);
  set(g, "rankdir", "TB");
  set(g, "nodesep", "0.35");
  set(g, "ranksep", "0.45");
  set(g, "splines", "spline");

  std::vector<Agraph_t*> clusters = addClusters(g, graph);
  std::vector<Agnode_t*> nodes;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    std::string id = "n" + std::to_string(i);
    Agnode_t* n = agnode(g, cstr(id), 1);
    set(n, "shape", "box");
    set(n, "fixedsize", "true");
    set(n, "width", std::to_string(sizes[i].width() / 72.0));
    set(n, "height", std::to_string(sizes[i].height() / 72.0));
    set(n, "label", "");
    if (graph.nodes[i].region >= 0) agsubnode(clusters[graph.nodes[i].region], n, 1);
    nodes.push_back(n);
  }
  std::vector<Agedge_t*> edges;
  for (size_t i = 0; i < graph.edges.size(); ++i) {
    std::string id = "e" + std::to_string(i);
    edges.push_back(agedge(g, nodes[graph.edges[i].from], nodes[graph.edges[i].to], cstr(id), 1));
  }
  addRankingEdges(g, graph, nodes);
  alignRegionBoundaries(g, graph, clusters, nodes);

  if (gvLayout(gvc, g, "dot") != 0) {
    agclose(g);
    gvFreeContext(gvc);
    return columnFallback(graph, sizes, QStringLiteral("Graphviz could not lay out the graph"));
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
  for (Agraph_t* cluster : clusters) {
    boxf box = GD_bb(cluster);
    l.regions.push_back(QRectF(toScene(box.LL), toScene(box.UR)).normalized());
  }
  l.bounds = QRectF(0, 0, bb.UR.x - bb.LL.x, bb.UR.y - bb.LL.y);
  gvFreeLayout(gvc, g);
  agclose(g);
  gvFreeContext(gvc);
  return l;
}

}  // namespace kiln::gui
