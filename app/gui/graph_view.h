// The Graph view: the fused graph as the runtime runs it (one box per kernel call), laid out by
// Graphviz (graph_layout.h) and drawn in a QGraphicsScene; the calls inside an if/loop call sit in
// a labelled box per region ("%x0 loop · body") below it. Ctrl+wheel or +/- zoom, drag pans,
// the search field finds nodes by operator, function or kernel; boxes are coloured by fused
// kernel or by measured time (heat). Clicking a node shows its ops, shapes and time, and its
// kernel's loop IR, LLVM IR and assembly (fetched on demand through kernelCodeRequested).
#pragma once

#include <QComboBox>
#include <QGraphicsView>
#include <QLabel>
#include <QLineEdit>
#include <QTabWidget>
#include <QWidget>

#include <memory>
#include <optional>

#include "app/gui/graph_layout.h"
#include "app/inspect.h"
#include "profiler/records.h"

namespace kiln::gui {

class CodeView;
class GraphNodeItem;
class GraphRegionItem;

/// Box sizes (points) for the layout, from the text each node will show.
std::vector<QSizeF> graphNodeSizes(const app::GraphDescription& graph, double charWidth, double lineHeight);

class GraphCanvas : public QGraphicsView {
  Q_OBJECT
 public:
  explicit GraphCanvas(QWidget* parent = nullptr);
  void zoomBy(double factor);
  void fitAll();

 protected:
  void wheelEvent(QWheelEvent* event) override;
};

class GraphView : public QWidget {
  Q_OBJECT
 public:
  enum class ColorMode { Kernel, Heat, OpKind };
  explicit GraphView(QWidget* parent = nullptr);

  void setGraph(std::shared_ptr<const app::Inspection> inspection, const GraphLayout& layout);
  void clear(const QString& message);
  /// Per-call medians for the heat colouring and the node details; nullopt clears them.
  void setProfile(std::optional<profiler::ProfileRecord> profile);
  void setColorMode(ColorMode mode);
  void setKernelCode(const app::KernelCode& code);
  void setKernelCodeError(const QString& kernel, const QString& message);
  /// Selects and centres the node of plan call `call`.
  void selectCall(int call);
  /// Highlights nodes matching `text`, centres the next one; returns the number of matches.
  int search(const QString& text);
  int nodeCount() const { return static_cast<int>(m_items.size()); }
  int regionCount() const { return static_cast<int>(m_regions.size()); }
  /// Where node `node` and region `region` (GraphDescription indices) are drawn, in the scene.
  QRectF nodeRect(int node) const;
  QRectF regionRect(int region) const;
  int selectedNode() const { return m_selected; }
  GraphCanvas* canvas() const { return m_canvas; }
  QTabWidget* codeTabs() const { return m_codeTabs; }
  QLabel* details() const { return m_details; }

 signals:
  void kernelCodeRequested(const QString& kernel);
  void callSelected(int call);

 private:
  void selectNode(int node);
  void recolor();
  void showDetails(int node);
  const profiler::OpRecord* recordOfCall(int call) const;
  double timeOfCall(int call) const;

  GraphCanvas* m_canvas;
  QGraphicsScene* m_scene;
  QComboBox* m_colorMode;
  QLineEdit* m_search;
  QLabel* m_matches;
  QLabel* m_legend;
  QLabel* m_details;
  QTabWidget* m_codeTabs;
  CodeView* m_loopIr;
  CodeView* m_llvmIr;
  CodeView* m_asm;
  std::shared_ptr<const app::Inspection> m_inspection;
  std::optional<profiler::ProfileRecord> m_profile;
  std::vector<GraphNodeItem*> m_items;
  std::vector<GraphRegionItem*> m_regions;
  std::vector<int> m_searchHits;
  int m_searchCursor = -1;
  int m_selected = -1;
  QString m_shownKernel;
  ColorMode m_mode = ColorMode::Kernel;
};

}  // namespace kiln::gui
