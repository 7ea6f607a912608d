// The dialog that asks for a model's input shapes when its file records none (a module traced and
// saved by the user): one row per forward argument (its name, the dimensions, the dtype), or the
// whole `--input-shapes` text. OK is enabled only for shapes the façade accepts
// (app::parseInputShapes, app::matchInputNames); the Workbench remembers them per file.
#pragma once

#include <QDialog>

#include <string>
#include <vector>

#include "app/facade.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QDialogButtonBox;

namespace kiln::gui {

class InputShapesDialog : public QDialog {
  Q_OBJECT
 public:
  /// `names`: the model's forward arguments; `initial`: shapes to start from (may be empty).
  InputShapesDialog(const QString& model, std::vector<std::string> names, const std::vector<app::InputSpec>& initial,
                    QWidget* parent = nullptr);

  /// The row of each input: its dimensions ("1,3,224,224") and dtype ("float32", ...).
  QLineEdit* dimsEdit(int input) const { return m_dims.at(static_cast<size_t>(input)); }
  QComboBox* dtypeBox(int input) const { return m_dtypes.at(static_cast<size_t>(input)); }
  /// The whole text form; when not empty it is used instead of the rows.
  QLineEdit* textEdit() const { return m_text; }
  QDialogButtonBox* buttons() const { return m_buttons; }
  /// What is wrong with the current entries ("" when they are fine).
  QString problem() const { return m_problem; }
  /// The accepted shapes, in forward-argument order, named.
  const std::vector<app::InputSpec>& specs() const { return m_specs; }

 private:
  void validate();

  std::vector<std::string> m_names;
  std::vector<QLineEdit*> m_dims;
  std::vector<QComboBox*> m_dtypes;
  QLineEdit* m_text;
  QLabel* m_problemLabel;
  QDialogButtonBox* m_buttons;
  QString m_problem;
  std::vector<app::InputSpec> m_specs;
};

}  // namespace kiln::gui
