// The IR view: each stage's text (imported graph, optimized graph, loop IR, LLVM IR, assembly)
// with search, and line diffs of the graph before and after optimization, as a whole and per
// pass that changed it. LLVM IR and assembly of the whole module are generated only when asked
// for (moduleTextRequested), since they are large.
#pragma once

#include <QComboBox>
#include <QLabel>
#include <QWidget>

#include <map>
#include <memory>

#include "app/inspect.h"

namespace kiln::gui {

class CodeView;

class IrView : public QWidget {
  Q_OBJECT
 public:
  explicit IrView(QWidget* parent = nullptr);
  void setInspection(std::shared_ptr<const app::Inspection> inspection);
  void clear(const QString& message);
  void setModuleText(app::IrStage stage, const QString& text);
  /// Shows entry `index` of the stage picker (0: imported graph ... then the diffs).
  void showEntry(int index);
  int entryCount() const { return m_stage->count(); }
  CodeView* codeView() const { return m_code; }

 signals:
  void moduleTextRequested(app::IrStage stage);

 private:
  void showCurrent();
  void showDiff(const std::string& before, const std::string& after, const QString& title);

  QComboBox* m_stage;
  QLabel* m_summary;
  CodeView* m_code;
  std::shared_ptr<const app::Inspection> m_inspection;
  std::map<int, QString> m_moduleText;  // IrStage → text, once generated
};

}  // namespace kiln::gui
