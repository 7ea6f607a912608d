#include "app/gui/ir_view.h"

#include <QHBoxLayout>
#include <QTextBlock>
#include <QTextCursor>
#include <QVBoxLayout>

#include "app/gui/format.h"
#include "app/gui/text_view.h"

namespace kiln::gui {

namespace {
enum Entry { Imported, Optimized, Lowered, Llvm, Assembly, WholeDiff, FirstPassDiff };
}

IrView::IrView(QWidget* parent) : QWidget(parent) {
  m_stage = new QComboBox(this);
  m_stage->setMinimumWidth(320);
  m_summary = new QLabel(this);
  m_summary->setStyleSheet(QStringLiteral("color: #555"));
  m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
  // The pipeline text is long: without this the label would widen the whole window.
  m_summary->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  m_code = new CodeView(this);
  auto* bar = new QHBoxLayout;
  bar->addWidget(new QLabel(tr("Stage:"), this));
  bar->addWidget(m_stage);
  bar->addWidget(m_summary, 1);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addLayout(bar);
  layout->addWidget(m_code, 1);
  connect(m_stage, &QComboBox::currentIndexChanged, this, &IrView::showCurrent);
  clear(tr("Open a model to see its IR."));
}

void IrView::clear(const QString& message) {
  m_inspection.reset();
  m_moduleText.clear();
  QSignalBlocker block(m_stage);
  m_stage->clear();
  m_stage->setEnabled(false);
  m_summary->clear();
  m_code->setPlaceholder(message);
}

void IrView::setInspection(std::shared_ptr<const app::Inspection> inspection) {
  m_inspection = std::move(inspection);
  m_moduleText.clear();
  int previous = m_stage->currentIndex();
  {
    QSignalBlocker block(m_stage);
    m_stage->clear();
    m_stage->addItem(tr("Imported graph"));
    m_stage->addItem(tr("Optimized graph (fused)"));
    m_stage->addItem(tr("Loop IR (%1 kernels)").arg(m_inspection->numKernels));
    m_stage->addItem(tr("LLVM IR (optimized)"));
    m_stage->addItem(tr("Assembly"));
    m_stage->addItem(tr("Diff: imported → optimized graph"));
    for (const auto& p : m_inspection->passes)
      if (p.changed && !p.irAfter.empty())
        m_stage->addItem(tr("Diff: pass %1 (%2 → %3 nodes)").arg(qs(p.invocation)).arg(p.nodesBefore).arg(p.nodesAfter));
    m_stage->setEnabled(true);
    m_stage->setCurrentIndex(previous >= 0 && previous < m_stage->count() ? previous : Optimized);
  }
  m_summary->setToolTip(qs(m_inspection->pipeline));
  showCurrent();
}

void IrView::showEntry(int index) { m_stage->setCurrentIndex(index); }

void IrView::setModuleText(app::IrStage stage, const QString& text) {
  m_moduleText[static_cast<int>(stage)] = text;
  int entry = stage == app::IrStage::Llvm ? Llvm : Assembly;
  if (m_stage->currentIndex() == entry) m_code->setText(text);
}

void IrView::showCurrent() {
  if (!m_inspection) return;
  int entry = m_stage->currentIndex();
  m_summary->setText(tr("target %1, -O%2, pipeline: %3")
                         .arg(qs(m_inspection->targetString))
                         .arg(m_inspection->optLevel)
                         .arg(m_inspection->pipeline.empty() ? tr("(none)") : qs(m_inspection->pipeline)));
  switch (entry) {
    case Imported: m_code->setText(qs(m_inspection->importedText)); return;
    case Optimized: m_code->setText(qs(m_inspection->optimizedText)); return;
    case Lowered: m_code->setText(qs(m_inspection->loweredText)); return;
    case Llvm:
    case Assembly: {
      app::IrStage stage = entry == Llvm ? app::IrStage::Llvm : app::IrStage::Assembly;
      auto it = m_moduleText.find(static_cast<int>(stage));
      if (it != m_moduleText.end()) {
        m_code->setText(it->second);
        return;
      }
      m_code->setPlaceholder(tr("Generating %1 for %2 kernels…").arg(entry == Llvm ? tr("LLVM IR") : tr("assembly")).arg(m_inspection->numKernels));
      emit moduleTextRequested(stage);
      return;
    }
    case WholeDiff:
      showDiff(m_inspection->importedText, m_inspection->optimizedText, tr("imported → optimized"));
      return;
    default: break;
  }
  // The n-th pass that changed the graph: diff against the graph before it.
  int wanted = entry - FirstPassDiff, seen = 0;
  std::string before = m_inspection->importedText;
  for (const auto& p : m_inspection->passes) {
    if (!p.changed || p.irAfter.empty()) continue;
    if (seen++ == wanted) {
      showDiff(before, p.irAfter, qs(p.invocation));
      return;
    }
    before = p.irAfter;
  }
}

void IrView::showDiff(const std::string& before, const std::string& after, const QString& title) {
  std::vector<app::DiffLine> lines = app::lineDiff(before, after);
  int added = 0, removed = 0;
  QPlainTextEdit* edit = m_code->editor();
  edit->clear();
  QTextCursor c(edit->document());
  QTextBlockFormat same, plus, minus;
  plus.setBackground(QColor(0xdd, 0xf4, 0xdd));
  minus.setBackground(QColor(0xfb, 0xe0, 0xe0));
  c.beginEditBlock();
  bool first = true;
  for (const auto& l : lines) {
    if (!first) c.insertBlock();
    first = false;
    const char* sign = l.kind == app::DiffKind::Added ? "+ " : l.kind == app::DiffKind::Removed ? "- " : "  ";
    c.setBlockFormat(l.kind == app::DiffKind::Added ? plus : l.kind == app::DiffKind::Removed ? minus : same);
    c.insertText(QLatin1String(sign) + qs(l.text));
    added += l.kind == app::DiffKind::Added;
    removed += l.kind == app::DiffKind::Removed;
  }
  c.endEditBlock();
  edit->moveCursor(QTextCursor::Start);
  m_summary->setText(tr("%1: %2 lines removed, %3 added").arg(title).arg(removed).arg(added));
}

}  // namespace kiln::gui
