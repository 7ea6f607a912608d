#include "app/gui/input_shapes_dialog.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QVBoxLayout>

namespace kiln::gui {

namespace {

const QStringList& dtypeNames() {
  static const QStringList names{QStringLiteral("float32"), QStringLiteral("float64"), QStringLiteral("int64"),
                                 QStringLiteral("int32"),   QStringLiteral("int8"),    QStringLiteral("uint8"),
                                 QStringLiteral("bool")};
  return names;
}

}  // namespace

InputShapesDialog::InputShapesDialog(const QString& model, std::vector<std::string> names,
                                     const std::vector<app::InputSpec>& initial, QWidget* parent)
    : QDialog(parent), m_names(std::move(names)) {
  setWindowTitle(tr("Input shapes of %1").arg(model));
  auto* layout = new QVBoxLayout(this);
  auto* intro = new QLabel(tr("%1 does not record the shapes of its inputs (a traced module saved with "
                              "torch.jit.save). Give each input's dimensions, e.g. 1,3,224,224:")
                               .arg(model));
  intro->setWordWrap(true);
  layout->addWidget(intro);
  auto* form = new QFormLayout;
  for (size_t i = 0; i < m_names.size(); ++i) {
    auto* row = new QHBoxLayout;
    auto* dims = new QLineEdit(this);
    dims->setObjectName(QStringLiteral("dims_%1").arg(i));
    dims->setPlaceholderText(QStringLiteral("1,3,224,224"));
    auto* dtype = new QComboBox(this);
    dtype->addItems(dtypeNames());
    if (i < initial.size()) {
      QStringList d;
      for (int64_t v : initial[i].shape) d << QString::number(v);
      dims->setText(d.join(QLatin1Char(',')));
      dtype->setCurrentText(QString::fromStdString(app::inputDTypeName(initial[i].dtype)));
    }
    row->addWidget(dims, 1);
    row->addWidget(dtype);
    form->addRow(QString::fromStdString(m_names[i]), row);
    m_dims.push_back(dims);
    m_dtypes.push_back(dtype);
    connect(dims, &QLineEdit::textChanged, this, &InputShapesDialog::validate);
    connect(dtype, &QComboBox::currentTextChanged, this, &InputShapesDialog::validate);
  }
  layout->addLayout(form);
  layout->addWidget(new QLabel(tr("or as one line, as kiln --input-shapes takes it:")));
  m_text = new QLineEdit(this);
  m_text->setObjectName(QStringLiteral("shapesText"));
  QStringList example;
  for (const std::string& n : m_names) example << QString::fromStdString(n) + QStringLiteral(":[1,3,224,224]");
  m_text->setPlaceholderText(example.join(QLatin1Char(',')));
  connect(m_text, &QLineEdit::textChanged, this, &InputShapesDialog::validate);
  layout->addWidget(m_text);
  m_problemLabel = new QLabel(this);
  m_problemLabel->setWordWrap(true);
  m_problemLabel->setStyleSheet(QStringLiteral("color: #b3261e"));
  layout->addWidget(m_problemLabel);
  m_buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
  connect(m_buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(m_buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  layout->addWidget(m_buttons);
  validate();
}

void InputShapesDialog::validate() {
  std::string text = m_text->text().trimmed().toStdString();
  if (text.empty()) {
    for (size_t i = 0; i < m_names.size(); ++i) {
      if (i) text += ",";
      text += m_names[i] + ":[" + m_dims[i]->text().remove(QLatin1Char(' ')).toStdString() + "]:" +
              m_dtypes[i]->currentText().toStdString();
    }
  }
  m_problem.clear();
  m_specs.clear();
  auto parsed = app::parseInputShapes(text);
  if (!parsed) {
    m_problem = QString::fromStdString(parsed.error().message);
  } else {
    try {
      m_specs = app::matchInputNames(parsed.value(), m_names);
    } catch (const Error& e) {
      m_problem = QString::fromStdString(e.what());
    }
  }
  bool empty = m_text->text().trimmed().isEmpty() &&
               std::all_of(m_dims.begin(), m_dims.end(), [](QLineEdit* e) { return e->text().trimmed().isEmpty(); });
  m_problemLabel->setText(empty ? QString() : m_problem);
  m_buttons->button(QDialogButtonBox::Ok)->setEnabled(m_problem.isEmpty());
}

}  // namespace kiln::gui
