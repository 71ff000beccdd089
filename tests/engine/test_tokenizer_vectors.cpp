// llama.cpp's tokenizer test vectors: for every vocab-only GGUF under shared/models/vocab-gguf
// or the llama.cpp vocab cache (scripts/fetch-llama-vocab.sh) with .inp/.out files, each test
// string must encode (no BOS, special tokens not parsed) to exactly the ids llama.cpp expects,
// and decode back to the string where the vocab is lossless. A file in both folders counts once.
#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/tokenizer/tokenizer.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QTest>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include "test_paths.h"

using namespace iwb;
using namespace iwb::tokenizer;

Q_DECLARE_METATYPE(std::vector<int32_t>)

namespace {

// The shared folder first: a file in both is taken from there.
QStringList vocab_dirs() {
  return {QString::fromStdString(iwb::test::shared_models_dir()) + "/vocab-gguf", QStringLiteral(IWB_LLAMA_VOCAB_DIR)};
}

QString missing_message() {
  return "no vocab files in " + vocab_dirs().join(" or ") +
         " (scripts/fetch-llama-vocab.sh fetches llama.cpp's); vocab test vectors skipped";
}

// File name -> path of every file matching `pattern` in the vocab folders, by name.
std::map<QString, QString> vocab_files(const QString& pattern) {
  std::map<QString, QString> files;
  for (const QString& folder : vocab_dirs()) {
    const QDir dir(folder);
    for (const QString& name : dir.entryList({pattern}, QDir::Files, QDir::Name))
      files.emplace(name, dir.filePath(name));
  }
  return files;
}

// The path of one vocab file by name; empty when neither folder has it.
QString vocab_path(const QString& name) {
  const auto files = vocab_files(name);
  return files.empty() ? QString() : files.begin()->second;
}

// Tokenizers are loaded once per file: the data rows of one file share it.
const Tokenizer* load_tokenizer(const QString& path, QString* error) {
  static std::map<QString, std::unique_ptr<Tokenizer>> cache;
  auto it = cache.find(path);
  if (it != cache.end()) return it->second.get();
  auto file = gguf::GgufFile::open(path.toStdString());
  if (!file) {
    *error = QString::fromStdString(file.error_message());
    return nullptr;
  }
  auto tokenizer = Tokenizer::from_gguf(**file);
  if (!tokenizer) {
    *error = QString::fromStdString(tokenizer.error_message());
    return nullptr;
  }
  auto [inserted, ok] = cache.emplace(path, std::make_unique<Tokenizer>(std::move(tokenizer.value())));
  return inserted->second.get();
}

QByteArray read_all(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) return {};
  return f.readAll();
}

// The .inp convention of llama.cpp's test-tokenizer-0: strings separated by
// "\n__ggml_vocab_test__\n"; the separator after the last string ends the list.
QList<QByteArray> split_inputs(const QByteArray& raw) {
  static const QByteArray sep = "\n__ggml_vocab_test__\n";
  QList<QByteArray> out;
  qsizetype pos = 0;
  while (pos < raw.size()) {
    const qsizetype next = raw.indexOf(sep, pos);
    if (next < 0) {
      out.push_back(raw.mid(pos));
      break;
    }
    out.push_back(raw.mid(pos, next - pos));
    pos = next + sep.size();
  }
  return out;
}

std::vector<int32_t> parse_ids(const QByteArray& line) {
  std::vector<int32_t> ids;
  for (const QByteArray& part : line.trimmed().split(' ')) {
    if (!part.isEmpty()) ids.push_back(part.toInt());
  }
  return ids;
}

QString describe(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  QStringList parts;
  for (int32_t id : ids) {
    parts << QStringLiteral("%1'%2'").arg(id).arg(QString::fromUtf8(tok.token_to_piece(id, true)));
  }
  return parts.join(' ');
}

}  // namespace

class TestTokenizerVectors : public QObject {
  Q_OBJECT

 private slots:
  void llama_vocab_cache_present();
  void encodes_like_llama_cpp_data();
  void encodes_like_llama_cpp();
  void every_vocab_file_loads_and_round_trips_data();
  void every_vocab_file_loads_and_round_trips();
  void gemma4_file_settings();
  void encodes_10kb_quickly();
  void encodes_from_several_threads();
};

// Says so when llama.cpp's files (gemma-4, qwen35, command-r, ...) are not there to be checked.
void TestTokenizerVectors::llama_vocab_cache_present() {
  if (!QDir(QStringLiteral(IWB_LLAMA_VOCAB_DIR)).exists()) {
    QSKIP("llama.cpp's vocab files are absent from " IWB_LLAMA_VOCAB_DIR
          " (scripts/fetch-llama-vocab.sh fetches them): gemma-4, qwen35, command-r and others are not checked");
  }
}

void TestTokenizerVectors::encodes_like_llama_cpp_data() {
  QTest::addColumn<QString>("path");
  QTest::addColumn<QByteArray>("input");
  QTest::addColumn<std::vector<int32_t>>("expected");
  const std::map<QString, QString> inputs = vocab_files("*.gguf.inp");
  if (inputs.empty()) QSKIP(qPrintable(missing_message()));
  for (const auto& [name, inp] : inputs) {
    const QString gguf = inp.chopped(4);
    const QList<QByteArray> strings = split_inputs(read_all(inp));
    const QList<QByteArray> lines = read_all(gguf + ".out").split('\n');
    QVERIFY2(lines.size() >= strings.size(), qPrintable(gguf + ": fewer .out lines than .inp strings"));
    const QString short_name = QString(name).remove("ggml-vocab-").remove(".gguf.inp");
    for (qsizetype i = 0; i < strings.size(); ++i) {
      QString shown = QString::fromUtf8(strings[i].left(24));
      shown.replace('\n', "\\n").replace('\t', "\\t");
      QTest::addRow("%s #%02d '%s'", qPrintable(short_name), int(i), qPrintable(shown))
          << gguf << strings[i] << parse_ids(lines[i]);
    }
  }
}

void TestTokenizerVectors::encodes_like_llama_cpp() {
  QFETCH(QString, path);
  QFETCH(QByteArray, input);
  QFETCH(std::vector<int32_t>, expected);
  QString error;
  const Tokenizer* tok = load_tokenizer(path, &error);
  QVERIFY2(tok != nullptr, qPrintable(error));

  const std::string text = input.toStdString();
  const std::vector<int32_t> ids = tok->encode(text, {.add_bos = false, .parse_special = false});
  QVERIFY2(ids == expected,
           qPrintable(QStringLiteral("\n   got: %1\n  want: %2").arg(describe(*tok, ids), describe(*tok, expected))));

  // WordPiece lowercases and strips accents, so only SPM and byte-level BPE round-trip.
  if (tok->vocab().kind != VocabKind::WordPiece) {
    QCOMPARE(QByteArray::fromStdString(tok->decode(ids)), input);
  }
}

void TestTokenizerVectors::every_vocab_file_loads_and_round_trips_data() {
  QTest::addColumn<QString>("path");
  const std::map<QString, QString> files = vocab_files("*.gguf");
  if (files.empty()) QSKIP(qPrintable(missing_message()));
  for (const auto& [name, path] : files) QTest::newRow(qPrintable(name)) << path;
}

// Every file, with test vectors or not: a tokenizer model we do not support fails here.
void TestTokenizerVectors::every_vocab_file_loads_and_round_trips() {
  QFETCH(QString, path);
  const std::string text = "Hello world!\n\tThe quick brown fox, 3.14159 — naïve café 日本語 🦙";
  QString error;
  const Tokenizer* tok = load_tokenizer(path, &error);
  if (tok == nullptr) {
    // Tokenizer models known not to be supported yet are skipped by name (llama.cpp's t5 / unigram
    // of nomic-bert-moe, an embedding model); any other failure to load fails.
    auto file = gguf::GgufFile::open(path.toStdString());
    const std::string model = file ? (*file)->get_string("tokenizer.ggml.model").value_or("") : "";
    if (model == "t5") QSKIP(qPrintable(path + ": the t5 (unigram) tokenizer is not supported: " + error));
  }
  QVERIFY2(tok != nullptr, qPrintable(path + ": " + error));
  const std::vector<int32_t> ids = tok->encode(text);
  QVERIFY(!ids.empty());
  for (int32_t id : ids) QVERIFY(tok->is_valid(id));
  if (tok->vocab().add_bos) QCOMPARE(ids.front(), tok->bos());
  if (tok->vocab().kind != VocabKind::WordPiece) {
    QCOMPARE(QString::fromStdString(tok->decode(ids)), QString::fromStdString(text));
  }
}

// Gemma 4's file as llama.cpp reads it: BOS added, its turn and tool-response markers and <eos>
// end generation, "</s>" is ordinary text, turn markers are parsed only on request.
void TestTokenizerVectors::gemma4_file_settings() {
  const QString path = vocab_path("ggml-vocab-gemma-4.gguf");
  if (path.isEmpty()) QSKIP("ggml-vocab-gemma-4.gguf not found");
  QString error;
  const Tokenizer* tok = load_tokenizer(path, &error);
  QVERIFY2(tok != nullptr, qPrintable(error));
  QCOMPARE(tok->vocab().model, std::string("gemma4"));
  QCOMPARE(tok->bos(), 2);
  QCOMPARE(tok->encode("Hello world"), (std::vector<int32_t>{2, 9259, 1902}));
  for (int32_t id : {1, 50, 106}) QVERIFY2(tok->is_end_of_generation(id), qPrintable(QString::number(id)));
  for (int32_t id : {2, 105, 212}) QVERIFY2(!tok->is_end_of_generation(id), qPrintable(QString::number(id)));
  QCOMPARE(tok->encode("<|turn>user\nHi<turn|>", {.add_bos = false, .parse_special = true}),
           (std::vector<int32_t>{105, 2364, 107, 10979, 106}));
  QCOMPARE(tok->decode(std::vector<int32_t>{2, 105, 2364, 107, 10979, 106}), std::string("user\nHi"));
}

// Not a benchmark: a guard against an accidentally quadratic path (seconds instead of ms).
void TestTokenizerVectors::encodes_10kb_quickly() {
  const QString path = vocab_path("ggml-vocab-deepseek-llm.gguf");
  if (path.isEmpty()) QSKIP("ggml-vocab-deepseek-llm.gguf not found");
  QString error;
  const Tokenizer* tok = load_tokenizer(path, &error);
  QVERIFY2(tok != nullptr, qPrintable(error));
  std::string text;
  while (text.size() < 10 * 1024) {
    text +=
        "The tokenizer splits text into words, numbers 1234567 and symbols; "
        "naïve café, Ελληνικά, русский, 日本語のテキスト 🦙\n";
  }
  QElapsedTimer timer;
  timer.start();
  const std::vector<int32_t> ids = tok->encode(text);
  const qint64 ms = timer.elapsed();
  qInfo("encoded %zu bytes into %zu tokens in %lld ms", text.size(), ids.size(), ms);
  QVERIFY2(ms < 5000, qPrintable(QStringLiteral("10 KB took %1 ms").arg(ms)));
  QCOMPARE(tok->decode(ids), text);
}

// One Tokenizer shared by threads (the engine and the UI both tokenize): same ids everywhere.
void TestTokenizerVectors::encodes_from_several_threads() {
  const QString path = vocab_path("ggml-vocab-deepseek-coder.gguf");
  if (path.isEmpty()) QSKIP("ggml-vocab-deepseek-coder.gguf not found");
  QString error;
  const Tokenizer* tok = load_tokenizer(path, &error);
  QVERIFY2(tok != nullptr, qPrintable(error));
  const QList<QByteArray> inputs = split_inputs(read_all(path + ".inp"));
  std::vector<std::vector<int32_t>> reference;
  for (const QByteArray& input : inputs) reference.push_back(tok->encode(input.toStdString()));

  constexpr int kNumThreads = 4;
  std::atomic<int> num_mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kNumThreads; ++t) {
    threads.emplace_back([&, copy = *tok] {
      for (int round = 0; round < 5; ++round) {
        for (qsizetype i = 0; i < inputs.size(); ++i) {
          if (copy.encode(inputs[i].toStdString()) != reference[static_cast<size_t>(i)]) ++num_mismatches;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  QCOMPARE(num_mismatches.load(), 0);
}

QTEST_GUILESS_MAIN(TestTokenizerVectors)
#include "test_tokenizer_vectors.moc"
