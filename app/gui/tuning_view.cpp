#include "app/gui/tuning_view.h"

#include <QChart>
#include <QChartView>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLineSeries>
#include <QSplitter>
#include <QValueAxis>
#include <QVBoxLayout>

#include <algorithm>

#include "app/gui/chart_util.h"
#include "app/gui/format.h"

namespace kiln::gui {

namespace {
QString duration(double seconds) {
  if (seconds <= 0) return QStringLiteral("—");
  int s = static_cast<int>(seconds + 0.5);
  if (s < 60) return QStringLiteral("%1 s").arg(s);
  if (s < 3600) return QStringLiteral("%1 min %2 s").arg(s / 60).arg(s % 60);
  return QStringLiteral("%1 h %2 min").arg(s / 3600).arg((s % 3600) / 60);
}
}  // namespace

TuningView::TuningView(QWidget* parent) : QWidget(parent) {
  m_model = new TuneTaskModel(this);
  m_tuner = new QComboBox(this);
  m_tuner->addItem(tr("XGBoost cost model + annealing"), QStringLiteral("xgb"));
  m_tuner->addItem(tr("Random search"), QStringLiteral("random"));
  m_tuner->addItem(tr("Grid search"), QStringLiteral("grid"));
  m_features = new QComboBox(this);
  m_features->addItem(tr("Knob values"), QStringLiteral("knobs"));
  m_features->addItem(tr("Loop nests (evolutionary search)"), QStringLiteral("loops"));
  m_features->addItem(tr("Both"), QStringLiteral("both"));
  m_features->setToolTip(tr("What the cost model learns from: each candidate's knob values (cheap), or the loop nest "
                            "of its compiled kernel (the same description for hand-written and searched schedules; "
                            "a lowering per scored candidate), or both"));
  connect(m_tuner, &QComboBox::currentIndexChanged, this,
          [this] { m_features->setEnabled(m_tuner->currentData().toString() == QLatin1String("xgb")); });
  m_cacheFlush = new QCheckBox(tr("Flush weights and output from the caches before each timed call"), this);
  m_cacheFlush->setToolTip(tr("Time each candidate as a layer runs when the model's other layers have evicted its "
                              "weights (its input stays warm); off: warm caches"));
  m_trials = new QSpinBox(this);
  m_trials->setRange(1, 10000);
  m_trials->setValue(32);
  m_trials->setSuffix(tr(" per task"));
  m_earlyStop = new QSpinBox(this);
  m_earlyStop->setRange(0, 10000);
  m_earlyStop->setSpecialValueText(tr("never"));
  m_earlyStop->setToolTip(tr("Stop a task after this many trials without improvement"));
  m_timeLimit = new QDoubleSpinBox(this);
  m_timeLimit->setRange(0, 24 * 3600);
  m_timeLimit->setSpecialValueText(tr("none"));
  m_timeLimit->setSuffix(tr(" s"));
  m_records = new QLineEdit(this);
  m_records->setToolTip(tr("Tuning records (JSON lines): read to resume, appended to; builds use them"));
  m_slurm = new QCheckBox(tr("Slurm job array"), this);
  m_slurm->setToolTip(tr("Submit the tasks as a Slurm job array (sbatch) and merge its records here; "
                         "the records file's folder must be seen by every node"));
  m_partition = new QLineEdit(this);
  m_partition->setPlaceholderText(tr("default partition"));
  m_arraySize = new QSpinBox(this);
  m_arraySize->setRange(1, 1000);
  m_arraySize->setValue(2);
  m_arraySize->setSuffix(tr(" array tasks"));
  auto* slurmRow = new QHBoxLayout;
  slurmRow->addWidget(m_slurm);
  slurmRow->addWidget(m_partition, 1);
  slurmRow->addWidget(m_arraySize);
  auto enableSlurm = [this](bool on) {
    m_partition->setEnabled(on);
    m_arraySize->setEnabled(on);
  };
  connect(m_slurm, &QCheckBox::toggled, this, enableSlurm);
  enableSlurm(false);
  m_start = new QPushButton(tr("Start tuning"), this);
  m_resume = new QPushButton(tr("Resume"), this);
  m_resume->setToolTip(tr("Continue from the records file: measured candidates are not measured again"));
  m_cancel = new QPushButton(tr("Cancel"), this);
  m_cancel->setToolTip(tr("Stops after the candidates in flight; their records are kept"));

  auto* form = new QFormLayout;
  form->addRow(tr("Tuner:"), m_tuner);
  form->addRow(tr("Cost model sees:"), m_features);
  form->addRow(tr("Timing:"), m_cacheFlush);
  form->addRow(tr("Trials:"), m_trials);
  form->addRow(tr("Early stopping:"), m_earlyStop);
  form->addRow(tr("Time limit:"), m_timeLimit);
  form->addRow(tr("Records:"), m_records);
  form->addRow(tr("Cluster:"), slurmRow);
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(m_start);
  buttons->addWidget(m_resume);
  buttons->addWidget(m_cancel);
  form->addRow(buttons);

  m_progress = new QProgressBar(this);
  m_progress->setFormat(tr("%v / %m trials"));
  m_progress->setValue(0);
  m_eta = new QLabel(this);
  m_message = new QLabel(this);
  m_message->setWordWrap(true);
  auto* status = new QVBoxLayout;
  status->addWidget(m_progress);
  status->addWidget(m_eta);
  status->addWidget(m_message);
  status->addStretch(1);
  auto* top = new QHBoxLayout;
  top->addLayout(form, 0);
  top->addSpacing(16);
  top->addLayout(status, 1);

  m_table = new QTableView(this);
  m_table->setModel(m_model);
  m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_table->setSelectionMode(QAbstractItemView::SingleSelection);
  m_table->verticalHeader()->hide();
  m_table->verticalHeader()->setDefaultSectionSize(22);
  m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  m_table->horizontalHeader()->setSectionResizeMode(TuneTaskModel::Task, QHeaderView::Interactive);
  m_table->horizontalHeader()->resizeSection(TuneTaskModel::Task, 230);
  m_table->setAlternatingRowColors(true);
  m_chart = new QChartView(this);
  m_chart->setRenderHint(QPainter::Antialiasing);
  auto* split = new QSplitter(Qt::Horizontal, this);
  split->addWidget(m_table);
  split->addWidget(m_chart);
  split->setSizes({620, 300});

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addLayout(top);
  layout->addWidget(split, 1);

  connect(m_start, &QPushButton::clicked, this, [this] { emit startRequested(false); });
  connect(m_resume, &QPushButton::clicked, this, [this] { emit startRequested(true); });
  connect(m_cancel, &QPushButton::clicked, this, &TuningView::cancelRequested);
  connect(m_table->selectionModel(), &QItemSelectionModel::currentRowChanged, this, [this](const QModelIndex& i) {
    m_followCurrent = false;
    showTaskChart(i.row());
  });
  connect(m_model, &TuneTaskModel::historyChanged, this, [this](int row) {
    if (m_followCurrent) showTaskChart(row);
    else if (row == m_chartRow) showTaskChart(row);
  });
  connect(m_model, &QAbstractItemModel::modelReset, this, [this] { showTaskChart(m_chartRow); });
  setRunning(false);
  showTaskChart(-1);
  setMessage(tr("Tuning searches each kernel's schedule knobs by measuring candidates. Open a model, then Start."));
}

app::TuneOptions TuningView::options(const app::TuneOptions& base) const {
  app::TuneOptions o = base;
  o.tuner = m_tuner->currentData().toString().toStdString();
  o.features = m_features->currentData().toString().toStdString();
  o.cacheFlush = m_cacheFlush->isChecked();
  o.trialsPerTask = m_trials->value();
  o.earlyStopping = m_earlyStop->value();
  o.timeLimitSeconds = m_timeLimit->value();
  o.recordsPath = m_records->text().toStdString();
  o.slurm.enabled = m_slurm->isChecked();
  o.slurm.partition = m_partition->text().trimmed().toStdString();
  o.slurm.arraySize = m_arraySize->value();
  return o;
}

void TuningView::setRecordsPath(const QString& path) { m_records->setText(path); }

void TuningView::setRunning(bool running) {
  m_start->setEnabled(!running);
  m_resume->setEnabled(!running);
  m_cancel->setEnabled(running);
  if (running) m_followCurrent = true;
}

void TuningView::setTasks(const std::vector<app::TuneTaskInfo>& tasks) { m_model->setTasks(tasks); }

void TuningView::applyProgress(const app::TuneProgress& p) {
  if (!p.slurmJob.empty()) {
    // The array's tasks run at once on their nodes: one line per array task instead of rows.
    m_progress->setRange(0, std::max(1, p.totalBudget));
    m_progress->setValue(p.totalTrials);
    m_eta->setText(tr("Slurm job %1 · elapsed %2 · ETA %3")
                       .arg(qs(p.slurmJob), duration(p.elapsedSeconds), duration(p.etaSeconds)));
    QStringList lines;
    for (const auto& t : p.slurmTasks)
      lines << tr("array task %1: %2, %3/%4 trials").arg(t.index).arg(qs(t.state)).arg(t.trials).arg(t.budget);
    setMessage(lines.join(QLatin1Char('\n')));
    return;
  }
  m_model->applyProgress(p);
  m_progress->setRange(0, std::max(1, p.totalBudget));
  m_progress->setValue(p.totalTrials);
  m_eta->setText(tr("Task %1 of %2 · elapsed %3 · ETA %4 · %5 failed candidates")
                     .arg(p.taskIndex + 1)
                     .arg(p.numTasks)
                     .arg(duration(p.elapsedSeconds), duration(p.etaSeconds))
                     .arg(p.errors));
  setMessage(qs(p.message));
}

void TuningView::setResult(const app::TuneResult& r) {
  m_model->applyResult(r);
  QString after = r.untunedMs > 0 && r.tunedMs > 0
                      ? tr(" End to end: %1 untuned → %2 tuned (%3×).")
                            .arg(formatMs(r.untunedMs), formatMs(r.tunedMs))
                            .arg(r.untunedMs / r.tunedMs, 0, 'f', 2)
                      : QString();
  if (r.cacheFlushed) after += tr(" Candidates timed with their weights and output flushed from the caches.");
  int confirmed = 0;  // records of the confirmation rounds (app/tune.h TuneOptions::confirmTop)
  for (const auto& t : r.tasks) confirmed += t.confirmed;
  setMessage(tr("%1 %2 candidates measured in %3, %4 failed; %5 records (%6 of them finalists timed again "
                "side by side) written to %7.%8")
                 .arg(r.cancelled ? tr("Cancelled:") : tr("Done:"))
                 .arg(r.totalMeasured)
                 .arg(duration(r.wallSeconds))
                 .arg(r.totalErrors)
                 .arg(r.recordsWritten)
                 .arg(confirmed)
                 .arg(qs(r.recordsPath) +
                          (r.recordsCopied > 0
                               ? tr(" (and %n record(s) of earlier runs copied from the session store)", "",
                                    r.recordsCopied)
                               : QString()),
                      after));
  // A Slurm run: array tasks that failed are named with their logs (their records were merged).
  QStringList failed;
  for (const auto& t : r.slurmTasks)
    if (!r.cancelled && t.failed())
      failed << tr("array task %1 of job %2 ended %3 (log %4)%5")
                    .arg(t.index)
                    .arg(qs(r.slurmJob), qs(t.state), qs(t.log), t.reason.empty() ? QString() : QStringLiteral(": ") + qs(t.reason));
  if (!failed.isEmpty()) setMessage(m_message->text() + QLatin1Char('\n') + failed.join(QLatin1Char('\n')), true);
}

void TuningView::setMessage(const QString& message, bool error) {
  m_message->setStyleSheet(error ? QStringLiteral("color: #b00020") : QString());
  m_message->setText(message);
}

void TuningView::showTaskChart(int row) {
  m_chartRow = row;
  auto* chart = new QChart;
  chart->legend()->setAlignment(Qt::AlignBottom);
  if (row < 0 || row >= m_model->rowCount()) {
    chart->setTitle(tr("Best GFLOP/s vs trials (select a task)"));
    chart->legend()->hide();
    replaceChart(m_chart, chart);
    return;
  }
  QString task = m_model->index(row, TuneTaskModel::Task).data().toString();
  chart->setTitle(task);  // the axes say what is plotted; the task name alone fits a narrow pane
  auto* best = new QLineSeries;
  best->setName(tr("best so far"));
  best->setPen(QPen(QColor(0xe6, 0x6a, 0x1f), 2.2));
  best->setPointsVisible(true);
  double maxX = 1, maxY = 1;
  for (const QPointF& p : m_model->history(row)) {
    if (p.y() <= 0) continue;  // before the first candidate was measured there is no "best"
    best->append(p);
    maxX = std::max(maxX, p.x());
    maxY = std::max(maxY, p.y());
  }
  chart->addSeries(best);
  double def = m_model->index(row, TuneTaskModel::Default).data().toString().toDouble();
  QLineSeries* baseline = nullptr;
  if (def > 0) {
    baseline = new QLineSeries;
    baseline->setName(tr("heuristic schedule"));
    baseline->setPen(QPen(QColor(0x60, 0x60, 0x60), 1.5, Qt::DashLine));
    *baseline << QPointF(0, def) << QPointF(maxX, def);
    maxY = std::max(maxY, def);
    chart->addSeries(baseline);
  }
  auto* x = new QValueAxis;
  x->setRange(0, maxX);
  x->setLabelFormat(QStringLiteral("%d"));
  // Whole trials only: a dynamic tick every 1, 2, 5, 10, ... trials.
  double step = 1;
  while (maxX / step > 8) step *= (QString::number(step).startsWith(QLatin1Char('2')) ? 2.5 : 2);
  x->setTickType(QValueAxis::TicksDynamic);
  x->setTickAnchor(0);
  x->setTickInterval(step);
  x->setTitleText(tr("trials"));
  auto* y = new QValueAxis;
  y->setRange(0, maxY * 1.15);
  y->setTitleText(tr("GFLOP/s"));
  y->setLabelFormat(QStringLiteral("%.0f"));
  y->applyNiceNumbers();
  chart->addAxis(x, Qt::AlignBottom);
  chart->addAxis(y, Qt::AlignLeft);
  for (auto* s : chart->series()) {
    s->attachAxis(x);
    s->attachAxis(y);
  }
  replaceChart(m_chart, chart);
}

}  // namespace kiln::gui
