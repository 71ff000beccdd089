// Gemma 4 files with bad metadata or missing tensors get a clear error naming the key or tensor
// (never a crash or a silently different model): iwb synth's small shapes written again with
// one key changed or one tensor left out, then read by model_config_from_gguf and
// bind_model_weights (through Engine::load for the tensors). Also run under ASan.
#include "gguf_rewrite.h"

#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/gguf/gguf_writer.h"
#include "iwb/engine/model/model_config.h"
#include "iwb/engine/runtime/engine.h"
#include "iwb/engine/synth/synth_model.h"
#include "iwb/engine/synth/synth_preset.h"

#include <QTemporaryDir>
#include <QtTest>

#include <functional>
#include <string>

using namespace iwb;
using namespace iwb::gguf;

using iwb::test::Change;

class TestGemma4Config : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_tmp;

  // The preset synthesized once per name, in F32.
  std::string preset_file(const std::string& preset) {
    return test::synthesized_f32(preset, m_tmp.filePath(QString::fromStdString(preset + ".gguf")).toStdString());
  }

  // The preset's file written again with `change`, at a path of its own.
  std::string changed_copy(const std::string& preset, const std::string& name, const Change& change) {
    return test::changed_copy(preset_file(preset), m_tmp.filePath(QString::fromStdString(name + ".gguf")).toStdString(),
                              change);
  }

  static Status config_of(const std::string& path) {
    auto file = GgufFile::open(path);
    if (!file.is_ok()) return file.status();
    auto config = model_config_from_gguf(**file);
    return config.is_ok() ? Status{} : config.status();
  }

 private slots:
  // The unchanged files load (the copies are faithful).
  void copiesLoad() {
    for (const char* preset : {"test-gemma4", "test-gemma4-e2b"}) {
      const std::string path = changed_copy(preset, std::string(preset) + "-copy", {});
      QVERIFY2(config_of(path).is_ok(), config_of(path).message().c_str());
      auto engine = Engine::load(path, {0, 2});
      QVERIFY2(engine.is_ok(), engine.error_message().c_str());
    }
  }

  void badMetadataIsNamed_data() {
    QTest::addColumn<QString>("preset");
    QTest::addColumn<QString>("what");
    QTest::addColumn<QString>("expected");
    QTest::newRow("kv heads per layer, too few") << "test-gemma4"
                                                 << "kv-short"
                                                 << "'gemma4.attention.head_count_kv' has 3 entries for 7 layers";
    QTest::newRow("kv heads not dividing the heads") << "test-gemma4"
                                                     << "kv-three"
                                                     << "does not divide the head count (4)";
    QTest::newRow("odd sliding head size") << "test-gemma4"
                                           << "swa-odd"
                                           << "'gemma4.attention.key_length_swa' must be positive and even";
    QTest::newRow("sliding RoPE wider than the head") << "test-gemma4"
                                                      << "rope-swa"
                                                      << "'gemma4.rope.dimension_count_swa' must be even and at most";
    QTest::newRow("shared KV layers after a sliding layer") << "test-gemma4-e2b"
                                                            << "shared-5"
                                                            << "needs a global layer just before the shared ones";
    QTest::newRow("FFN widths per layer, too many") << "test-gemma4-e2b"
                                                    << "ff-long"
                                                    << "'gemma4.feed_forward_length' has 13 entries for 12 layers";
    QTest::newRow("negative soft-cap") << "test-gemma4"
                                       << "cap"
                                       << "'gemma4.final_logit_softcapping' must be >= 0";
  }
  void badMetadataIsNamed() {
    QFETCH(QString, preset);
    QFETCH(QString, what);
    QFETCH(QString, expected);
    Change change;
    if (what == "kv-short") {
      change.metadata = [](GgufWriter& w) { w.set("gemma4.attention.head_count_kv", Value::i32_array({2, 2, 2})); };
    } else if (what == "kv-three") {
      change.metadata = [](GgufWriter& w) {
        w.set("gemma4.attention.head_count_kv", Value::i32_array({2, 2, 3, 2, 2, 1, 2}));
      };
    } else if (what == "swa-odd") {
      change.metadata = [](GgufWriter& w) { w.set_u32("gemma4.attention.key_length_swa", 63); };
    } else if (what == "rope-swa") {
      change.metadata = [](GgufWriter& w) { w.set_u32("gemma4.rope.dimension_count_swa", 128); };
    } else if (what == "shared-5") {
      // The first shared layer would be 7, after layer 6 (sliding): llama.cpp's rule needs a
      // global layer there.
      change.metadata = [](GgufWriter& w) { w.set_u32("gemma4.attention.shared_kv_layers", 5); };
    } else if (what == "ff-long") {
      change.metadata = [](GgufWriter& w) {
        w.set("gemma4.feed_forward_length",
              Value::i32_array({256, 256, 256, 256, 256, 256, 512, 512, 512, 512, 512, 512, 512}));
      };
    } else if (what == "cap") {
      change.metadata = [](GgufWriter& w) { w.set_f32("gemma4.final_logit_softcapping", -1.0f); };
    }
    const Status s = config_of(changed_copy(preset.toStdString(), what.toStdString(), change));
    QVERIFY(!s.is_ok());
    QVERIFY2(s.message().find(expected.toStdString()) != std::string::npos, s.message().c_str());
  }

  // A tensor Gemma 4 needs, left out: the load names it.
  void missingTensorsAreNamed_data() {
    QTest::addColumn<QString>("preset");
    QTest::addColumn<QString>("tensor");
    QTest::newRow("router scale") << "test-gemma4"
                                  << "blk.2.ffn_gate_inp.scale";
    QTest::newRow("experts' norm") << "test-gemma4"
                                   << "blk.0.pre_ffw_norm_2.weight";
    QTest::newRow("per-layer table") << "test-gemma4-e2b"
                                     << "per_layer_token_embd.weight";
    QTest::newRow("a layer's gate") << "test-gemma4-e2b"
                                    << "blk.3.inp_gate.weight";
    QTest::newRow("an own-KV layer's keys") << "test-gemma4-e2b"
                                            << "blk.5.attn_k.weight";
  }
  void missingTensorsAreNamed() {
    QFETCH(QString, preset);
    QFETCH(QString, tensor);
    Change change;
    change.dropped_tensor = tensor.toStdString();
    const std::string path =
        changed_copy(preset.toStdString(), "missing-" + QString(tensor).replace('.', '-').toStdString(), change);
    auto engine = Engine::load(path, {0, 2});
    QVERIFY(!engine.is_ok());
    QVERIFY2(engine.error_message().find("'" + tensor.toStdString() + "'") != std::string::npos,
             engine.error_message().c_str());
  }
};

QTEST_GUILESS_MAIN(TestGemma4Config)
#include "test_gemma4_config.moc"
