// The model-folder search: known folders follow the environment, .gguf files are found in the
// Hugging Face layout (snapshot links into blobs/) once each, and absent folders are harmless.
#include "iwb/engine/model/model_locations.h"

#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

using namespace iwb;

namespace {

void write_file(const QString& path, int bytes) {
  QDir().mkpath(QFileInfo(path).path());
  QFile f(path);
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write(QByteArray(bytes, 'x'));
}

}  // namespace

class TestModelLocations : public QObject {
  Q_OBJECT

 private slots:
  void init() {
    QVERIFY(m_home.isValid());
    qputenv("HOME", m_home.path().toUtf8());
    qputenv("XDG_CACHE_HOME", (m_home.path() + "/.cache").toUtf8());
    qunsetenv("HF_HOME");
    qunsetenv("HF_HUB_CACHE");
    qunsetenv("LLAMA_CACHE");
  }

  void foldersFollowTheEnvironment() {
    auto folders = known_model_folders();
    QCOMPARE(folders.size(), size_t(5));
    QCOMPARE(QString::fromStdString(folders[1].path), m_home.path() + "/.cache/huggingface/hub");
    QCOMPARE(QString::fromStdString(folders[2].path), m_home.path() + "/.lmstudio/models");
    for (const auto& f : folders) QVERIFY(!f.exists);
    qputenv("HF_HOME", "/opt/hf");
    QCOMPARE(QString::fromStdString(known_model_folders()[1].path), QString("/opt/hf/hub"));
    qputenv("HF_HUB_CACHE", "/srv/hub");
    QCOMPARE(QString::fromStdString(known_model_folders()[1].path), QString("/srv/hub"));
    QCOMPARE(QString::fromStdString(default_model_path()),
             m_home.path() + "/.cache/inference-workbench/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf");
  }

  void findsModelsOnceEach() {
    const QString hub = m_home.path() + "/.cache/huggingface/hub/models--org--name";
    write_file(hub + "/blobs/abc123", 100);
    QDir().mkpath(hub + "/snapshots/rev1");
    QVERIFY(QFile::link(hub + "/blobs/abc123", hub + "/snapshots/rev1/model-q4.gguf"));
    write_file(m_home.path() + "/.lmstudio/models/pub/repo/small.GGUF", 50);
    write_file(m_home.path() + "/.lmstudio/models/pub/repo/readme.txt", 10);
    write_file(m_home.path() + "/.cache/inference-workbench/models/default.gguf", 30);

    const auto models = find_gguf_models(known_model_folders());
    QCOMPARE(models.size(), size_t(3));
    QCOMPARE(QString::fromStdString(models[0].folder_label), QString("Inference Workbench models"));
    QVERIFY(QString::fromStdString(models[1].path).endsWith("snapshots/rev1/model-q4.gguf"));
    QCOMPARE(models[1].size_bytes, uint64_t(100));  // the link's target
    QVERIFY(QString::fromStdString(models[2].path).endsWith("small.GGUF"));

    // A second link to the same blob is the same file.
    QVERIFY(QFile::link(hub + "/blobs/abc123", hub + "/snapshots/rev1/alias.gguf"));
    QCOMPARE(find_gguf_models(known_model_folders()).size(), size_t(3));
    // Limits hold.
    QCOMPARE(find_gguf_models(known_model_folders(), 8, 2).size(), size_t(2));
    QCOMPARE(find_gguf_models(known_model_folders(), 1).size(), size_t(1));  // only the top-level default.gguf
  }

 private:
  QTemporaryDir m_home;
};

QTEST_GUILESS_MAIN(TestModelLocations)
#include "test_model_locations.moc"
