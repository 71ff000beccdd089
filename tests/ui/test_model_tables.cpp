// Tests of the model-info item models and the worker-side conversion: rows from a real GGUF
// file, display and sort roles, natural sorting and filtering through the proxy.
#include "gguf_fixtures.h"

#include "iwb/engine/gguf/gguf_file.h"
#include "model_info/metadata_table_model.h"
#include "model_info/model_details.h"
#include "model_info/model_loader.h"
#include "model_info/model_overview_widget.h"
#include "model_info/tensor_table_model.h"
#include "widgets/filtered_table_view.h"
#include "widgets/natural_sort_proxy_model.h"

#include <QHeaderView>
#include <QLineEdit>
#include <QLocale>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>

#include <algorithm>
#include <limits>
#include "test_paths.h"

using namespace iwb::ui;
using iwb::test::tinyModelTensors;

class TestModelTables : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase();
  void readsDetailsOfTinyModel();
  void readsDetailsOfVocabOnlyFile();
  void readDetailsReportsErrors();
  void tensorModelShowsRows();
  void naturalCompareOrdersAsPeopleCount();
  void tensorModelSortsNumericallyAndNaturally();
  void overviewOpensTensorsInNaturalOrder();
  void tensorModelFiltersAcrossColumns();
  void metadataModelShowsRows();
  void metadataModelSortsByKey();
  void filteredTableViewCountsAndShowsEmptyText();
  void loaderRunsOnItsThread();

 private:
  QStringList column(const QAbstractItemModel& model, int col) const;

  QTemporaryDir m_dir;
  QString m_tinyPath;
  ModelDetails m_tiny;
};

QStringList TestModelTables::column(const QAbstractItemModel& model, int col) const {
  QStringList values;
  for (int r = 0; r < model.rowCount(); ++r) values << model.index(r, col).data().toString();
  return values;
}

void TestModelTables::initTestCase() {
  QVERIFY(m_dir.isValid());
  m_tinyPath = m_dir.filePath(QStringLiteral("tiny.gguf"));
  const iwb::Status written = iwb::test::writeTinyModel(m_tinyPath);
  QVERIFY2(written.is_ok(), written.message().c_str());
  auto details = readModelDetails(m_tinyPath);
  QVERIFY2(details.is_ok(), details.error_message().c_str());
  m_tiny = *details;
}

void TestModelTables::readsDetailsOfTinyModel() {
  QCOMPARE(m_tiny.path, QFileInfo(m_tinyPath).absoluteFilePath());
  QCOMPARE(m_tiny.summary.architecture, std::string("llama"));
  QCOMPARE(m_tiny.summary.name, std::string(iwb::test::kTinyModelName));
  QCOMPARE(m_tiny.summary.num_params, iwb::test::tinyModelParamCount());
  QCOMPARE(m_tiny.summary.file_type, std::string("F16"));
  QCOMPARE(m_tiny.summary.hparams.head_count_kv, int64_t{2});
  QVERIFY(m_tiny.summary.has_chat_template);

  const auto& expected = tinyModelTensors();
  QCOMPARE(m_tiny.tensors.size(), qsizetype(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) {
    const TensorRow& row = m_tiny.tensors[qsizetype(i)];
    QCOMPARE(row.name, QString::fromStdString(expected[i].name));
    QCOMPARE(row.type, QString::fromLatin1(iwb::ggml_type_name(expected[i].type)));
    QCOMPARE(quint64(row.numElements), expected[i].numElements());
    QCOMPARE(row.numBytes, expected[i].numBytes());
  }
  QCOMPARE(m_tiny.tensors[0].shape, QStringLiteral("16 x 8"));
  // Q8_0: 34 bytes per block of 32 elements, 8 rows of one block each.
  QCOMPARE(m_tiny.tensors.last().numBytes, quint64{8 * 34});

  QCOMPARE(m_tiny.metadata.size(), qsizetype{iwb::test::kTinyModelNumMetadata});
  QCOMPARE(m_tiny.metadata[0].key, QStringLiteral("general.architecture"));
  QCOMPARE(m_tiny.metadata[0].type, QStringLiteral("str"));
  QCOMPARE(m_tiny.metadata[0].value, QStringLiteral("\"llama\""));
  const auto tokens = std::find_if(m_tiny.metadata.begin(), m_tiny.metadata.end(),
                                   [](const MetadataRow& r) { return r.key == "tokenizer.ggml.tokens"; });
  QVERIFY(tokens != m_tiny.metadata.end());
  QCOMPARE(tokens->type, QStringLiteral("str[%1]").arg(iwb::test::kTinyModelVocabSize));
  QVERIFY2(tokens->value.startsWith(QStringLiteral("[\"<unk>\", \"<s>\"")), qPrintable(tokens->value));
  // The tooltip form holds every item of a short array.
  QVERIFY2(tokens->fullValue.contains(QStringLiteral("\"abc\"")), qPrintable(tokens->fullValue));
}

void TestModelTables::readsDetailsOfVocabOnlyFile() {
  const QString path = QString::fromStdString(iwb::test::shared_models_dir()) + "/vocab-gguf/ggml-vocab-gpt-2.gguf";
  if (!QFileInfo::exists(path)) QSKIP("shared vocab GGUF files are not available");
  auto details = readModelDetails(path);
  QVERIFY2(details.is_ok(), details.error_message().c_str());
  QVERIFY(details->summary.is_vocab_only);
  QCOMPARE(details->tensors.size(), qsizetype{0});
  QCOMPARE(details->summary.tokenizer_model, std::string("gpt2"));
  QCOMPARE(details->summary.tokenizer_vocab_size, int64_t{50257});
  // The row count matches what the reader sees in the file.
  auto file = iwb::gguf::GgufFile::open(path.toStdString());
  QVERIFY(file.is_ok());
  QCOMPARE(details->metadata.size(), qsizetype((*file)->metadata().size()));
}

void TestModelTables::readDetailsReportsErrors() {
  const QString missing = m_dir.filePath(QStringLiteral("missing.gguf"));
  auto result = readModelDetails(missing);
  QVERIFY(!result.is_ok());
  QVERIFY(!result.error_message().empty());

  const QString corrupt = m_dir.filePath(QStringLiteral("corrupt.gguf"));
  QVERIFY(iwb::test::writeCorruptGguf(corrupt).is_ok());
  result = readModelDetails(corrupt);
  QVERIFY(!result.is_ok());
  QCOMPARE(result.status().code(), iwb::ErrorCode::CorruptFile);

  const QString text = m_dir.filePath(QStringLiteral("notes.gguf"));
  QVERIFY(iwb::test::writeTextFile(text, "just some text, long enough to hold a header\n").is_ok());
  result = readModelDetails(text);
  QVERIFY(!result.is_ok());
  QVERIFY(!result.error_message().empty());
}

void TestModelTables::tensorModelShowsRows() {
  TensorTableModel model;
  QCOMPARE(model.rowCount(), 0);
  QCOMPARE(model.columnCount(), int(TensorTableModel::ColumnCount));
  model.setTensors(m_tiny.tensors);
  QCOMPARE(model.rowCount(), int(tinyModelTensors().size()));
  QCOMPARE(model.rowCount(model.index(0, 0)), 0);  // a table: rows have no children

  const int q8Row = model.rowCount() - 1;
  QCOMPARE(model.index(q8Row, TensorTableModel::NameColumn).data().toString(), QStringLiteral("output.weight"));
  QCOMPARE(model.index(q8Row, TensorTableModel::TypeColumn).data().toString(), QStringLiteral("Q8_0"));
  QCOMPARE(model.index(q8Row, TensorTableModel::ShapeColumn).data().toString(), QStringLiteral("32 x 8"));
  QCOMPARE(model.index(q8Row, TensorTableModel::ElementsColumn).data().toString(), QLocale().toString(256));
  QCOMPARE(model.index(q8Row, TensorTableModel::SizeColumn).data().toString(), QStringLiteral("272 B"));
  QCOMPARE(model.index(q8Row, TensorTableModel::SizeColumn).data(TensorTableModel::SortRole).toULongLong(),
           quint64{272});
  QVERIFY(model.index(q8Row, TensorTableModel::SizeColumn).data(Qt::ToolTipRole).toString().contains("272"));
  QCOMPARE(model.headerData(TensorTableModel::SizeColumn, Qt::Horizontal).toString(), QStringLiteral("Size"));
  QVERIFY(!model.index(model.rowCount(), 0).data().isValid());

  quint64 total = 0;
  for (const auto& t : tinyModelTensors()) total += t.numBytes();
  QCOMPARE(model.totalBytes(), total);

  model.clear();
  QCOMPARE(model.rowCount(), 0);
}

void TestModelTables::naturalCompareOrdersAsPeopleCount() {
  QVERIFY(naturalCompare(u"blk.2.attn", u"blk.10.attn") < 0);
  QVERIFY(naturalCompare(u"blk.10.attn", u"blk.2.attn") > 0);
  QVERIFY(naturalCompare(u"blk.9", u"blk.09") != 0);  // equal values, still ordered...
  QVERIFY(naturalCompare(u"blk.9", u"blk.09") == -naturalCompare(u"blk.09", u"blk.9"));  // ...consistently
  QVERIFY(naturalCompare(u"Alpha", u"beta") < 0);                                        // case-insensitive
  QVERIFY(naturalCompare(u"token", u"token_embd") < 0);                                  // prefix first
  QVERIFY(naturalCompare(u"", u"a") < 0);
  QCOMPARE(naturalCompare(u"same.1", u"same.1"), 0);
  // Digit runs longer than any integer type still compare by value.
  QVERIFY(naturalCompare(u"x99999999999999999999999", u"x100000000000000000000000") < 0);
}

void TestModelTables::overviewOpensTensorsInNaturalOrder() {
  // The fixture stores blk.10 before blk.2, as text order would (Hugging Face conversions do).
  ModelOverviewWidget overview;
  overview.showModel(m_tiny);
  const QAbstractItemModel* shown = overview.tensorTable()->view()->model();
  QStringList names;
  for (int r = 0; r < shown->rowCount(); ++r) names << shown->index(r, TensorTableModel::NameColumn).data().toString();
  QVERIFY2(names.indexOf("blk.2.attn_norm.weight") < names.indexOf("blk.10.attn_norm.weight"),
           qPrintable(names.join(", ")));
  QCOMPARE(names.first(), QStringLiteral("blk.0.attn_q.weight"));
  QCOMPARE(overview.tensorTable()->view()->horizontalHeader()->sortIndicatorSection(),
           int(TensorTableModel::NameColumn));
  // A third click on the header returns to file order.
  overview.tensorTable()->view()->horizontalHeader()->setSortIndicator(-1, Qt::AscendingOrder);
  QCOMPARE(shown->index(3, TensorTableModel::NameColumn).data().toString(), QStringLiteral("blk.10.attn_norm.weight"));
}

void TestModelTables::tensorModelSortsNumericallyAndNaturally() {
  TensorTableModel model;
  model.setTensors(m_tiny.tensors);
  NaturalSortProxyModel proxy;
  proxy.setSourceModel(&model);
  proxy.setSortRole(TensorTableModel::SortRole);

  proxy.sort(TensorTableModel::SizeColumn, Qt::DescendingOrder);
  // blk.0.ffn_up.weight: 16 x 32 f16 = 1024 bytes, the largest.
  QCOMPARE(proxy.index(0, TensorTableModel::NameColumn).data().toString(), QStringLiteral("blk.0.ffn_up.weight"));
  quint64 previous = std::numeric_limits<quint64>::max();
  for (int r = 0; r < proxy.rowCount(); ++r) {
    const quint64 bytes = proxy.index(r, TensorTableModel::SizeColumn).data(TensorTableModel::SortRole).toULongLong();
    QVERIFY(bytes <= previous);
    previous = bytes;
  }

  proxy.sort(TensorTableModel::NameColumn, Qt::AscendingOrder);
  const QStringList names = column(proxy, TensorTableModel::NameColumn);
  // As people count: blk.2 before blk.10 (plain text order would put "blk.10" first).
  QVERIFY2(names.indexOf("blk.2.attn_norm.weight") < names.indexOf("blk.10.attn_norm.weight"),
           qPrintable(names.join(", ")));
  QCOMPARE(names.first(), QStringLiteral("blk.0.attn_q.weight"));
  QCOMPARE(names.last(), QStringLiteral("token_embd.weight"));

  // Shape sorts by element count, not by its text.
  proxy.sort(TensorTableModel::ShapeColumn, Qt::AscendingOrder);
  QCOMPARE(proxy.index(0, TensorTableModel::ShapeColumn).data().toString(), QStringLiteral("16"));
  QCOMPARE(proxy.index(proxy.rowCount() - 1, TensorTableModel::ShapeColumn).data().toString(),
           QStringLiteral("16 x 32"));

  // Column -1 restores file order.
  proxy.sort(-1);
  QCOMPARE(column(proxy, TensorTableModel::NameColumn), column(model, TensorTableModel::NameColumn));
}

void TestModelTables::tensorModelFiltersAcrossColumns() {
  TensorTableModel model;
  model.setTensors(m_tiny.tensors);
  NaturalSortProxyModel proxy;
  proxy.setSourceModel(&model);

  proxy.setFilterFixedString(QStringLiteral("ATTN_NORM"));  // case-insensitive
  QCOMPARE(proxy.rowCount(), 2);
  proxy.setFilterFixedString(QStringLiteral("f16"));  // matches the type column
  QCOMPARE(proxy.rowCount(), 2);
  QCOMPARE(proxy.index(0, TensorTableModel::TypeColumn).data().toString(), QStringLiteral("F16"));
  proxy.setFilterFixedString(QStringLiteral("no such tensor"));
  QCOMPARE(proxy.rowCount(), 0);
  proxy.setFilterFixedString(QString());
  QCOMPARE(proxy.rowCount(), model.rowCount());
}

void TestModelTables::metadataModelShowsRows() {
  MetadataTableModel model;
  model.setEntries(m_tiny.metadata);
  QCOMPARE(model.rowCount(), iwb::test::kTinyModelNumMetadata);
  QCOMPARE(model.columnCount(), 3);

  const int headKv = model.rowOfKey(QStringLiteral("llama.attention.head_count_kv"));
  QVERIFY(headKv >= 0);
  QCOMPARE(model.index(headKv, MetadataTableModel::TypeColumn).data().toString(), QStringLiteral("u32"));
  QCOMPARE(model.index(headKv, MetadataTableModel::ValueColumn).data().toString(), QStringLiteral("2"));
  QCOMPARE(model.rowOfKey(QStringLiteral("no.such.key")), -1);

  const int tmpl = model.rowOfKey(QStringLiteral("tokenizer.chat_template"));
  QVERIFY(tmpl >= 0);
  const QString tooltip = model.index(tmpl, MetadataTableModel::ValueColumn).data(Qt::ToolTipRole).toString();
  // The template's "<|im_start|>" must reach the tooltip escaped, or it would vanish as a tag.
  QVERIFY2(tooltip.contains(QStringLiteral("&lt;|im_start|&gt;")), qPrintable(tooltip));
  QVERIFY(!tooltip.contains(QStringLiteral("<|im_start|>")));
  QCOMPARE(model.headerData(MetadataTableModel::KeyColumn, Qt::Horizontal).toString(), QStringLiteral("Key"));
}

void TestModelTables::metadataModelSortsByKey() {
  MetadataTableModel model;
  model.setEntries(m_tiny.metadata);
  NaturalSortProxyModel proxy;
  proxy.setSourceModel(&model);
  proxy.setSortRole(MetadataTableModel::SortRole);
  proxy.sort(MetadataTableModel::KeyColumn, Qt::AscendingOrder);
  const QStringList keys = column(proxy, MetadataTableModel::KeyColumn);
  QCOMPARE(keys.size(), iwb::test::kTinyModelNumMetadata);
  for (int i = 1; i < keys.size(); ++i) {
    QVERIFY2(keys[i - 1].compare(keys[i], Qt::CaseInsensitive) <= 0, qPrintable(keys.join(", ")));
  }
  proxy.sort(MetadataTableModel::KeyColumn, Qt::DescendingOrder);
  QCOMPARE(proxy.index(0, 0).data().toString(), QStringLiteral("tokenizer.ggml.tokens"));
}

void TestModelTables::filteredTableViewCountsAndShowsEmptyText() {
  TensorTableModel model;
  FilteredTableView table(&model, TensorTableModel::SortRole);
  table.setEmptyText(QStringLiteral("No tensors"));
  QVERIFY(!table.filterEdit()->isEnabled());  // nothing to filter yet

  model.setTensors(m_tiny.tensors);
  QVERIFY(table.filterEdit()->isEnabled());
  table.filterEdit()->setText(QStringLiteral("blk.0"));
  QCOMPARE(table.proxy()->rowCount(), 2);
  table.filterEdit()->clear();
  QCOMPARE(table.proxy()->rowCount(), model.rowCount());
  // Until a header is clicked the view keeps file order.
  QCOMPARE(table.proxy()->index(0, 0).data().toString(), QStringLiteral("token_embd.weight"));
}

void TestModelTables::loaderRunsOnItsThread() {
  QThread thread;
  auto* loader = new ModelLoader;  // deleted in its own thread when the thread ends
  loader->moveToThread(&thread);
  connect(&thread, &QThread::finished, loader, &QObject::deleteLater);
  thread.start();

  // Results are collected in this (the GUI) thread through queued connections, as the window
  // does; the direct connection records which thread did the work.
  QThread* workThread = nullptr;
  connect(
      loader, &ModelLoader::loaded, loader, [&workThread] { workThread = QThread::currentThread(); },
      Qt::DirectConnection);
  QList<ModelDetails> loaded;
  QStringList failures;
  connect(loader, &ModelLoader::loaded, this, [&loaded](const ModelDetails& d) { loaded << d; });
  connect(loader, &ModelLoader::loadFailed, this,
          [&failures](const QString& path, const QString& message) { failures << path << message; });

  QMetaObject::invokeMethod(loader, "load", Qt::QueuedConnection, Q_ARG(QString, m_tinyPath));
  QTRY_COMPARE_WITH_TIMEOUT(loaded.size(), 1, 10000);
  QCOMPARE(workThread, &thread);
  QCOMPARE(loaded.first().tensors.size(), qsizetype(tinyModelTensors().size()));

  const QString missing = m_dir.filePath(QStringLiteral("nowhere.gguf"));
  QMetaObject::invokeMethod(loader, "load", Qt::QueuedConnection, Q_ARG(QString, missing));
  QTRY_COMPARE_WITH_TIMEOUT(failures.size(), 2, 10000);
  QCOMPARE(failures[0], missing);
  QVERIFY2(failures[1].contains(QStringLiteral("does not exist")), qPrintable(failures[1]));
  QCOMPARE(loaded.size(), 1);

  thread.quit();
  QVERIFY(thread.wait(10000));
}

QTEST_MAIN(TestModelTables)
#include "test_model_tables.moc"
