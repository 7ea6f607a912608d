// Lays out the graph description (app/inspect.h) with Graphviz's dot: only its layout is used
// (node centres and edge splines); drawing is the Workbench's own, in a QGraphicsScene. Runs on a
// worker thread; Graphviz is not thread-safe, so layouts are serialized by a mutex. The regions of
// if/loop calls are dot clusters (nested as the regions are), laid out below their call, whose
// successors come after them.
#pragma once

#include <QPainterPath>
#include <QRectF>
#include <QSizeF>
#include <QString>

#include <vector>

#include "app/inspect.h"

namespace kiln::gui {

struct GraphLayout {
  std::vector<QRectF> nodes;        // in scene coordinates (y grows downwards), per description node
  std::vector<QPainterPath> edges;  // per description edge, from the tail to the arrow's base
  std::vector<QPointF> arrowTips;   // per edge: where the arrow head points
  std::vector<QRectF> regions;      // per description region: the box around its nodes and label
  QRectF bounds;
  QString error;  // non-empty when Graphviz failed; nodes then sit in one column
};

/// `sizes[i]` is node i's box in points. Never throws.
GraphLayout layoutGraph(const app::GraphDescription& graph, const std::vector<QSizeF>& sizes);

}  // namespace kiln::gui
