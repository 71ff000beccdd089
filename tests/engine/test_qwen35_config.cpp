// Qwen 3.5 files with bad metadata or missing or misshapen tensors get a clear error naming the
// key or tensor (never a crash or a silently different model): iwb synth's test-qwen35 written
// again with one key changed or removed, or one tensor left out or reshaped, then read by
// model_config_from_gguf (the keys) and Engine::load (the tensors). Also run under ASan.
#include "gguf_rewrite.h"

#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/gguf/gguf_writer.h"
#include "iwb/engine/model/model_config.h"
#include "iwb/engine/runtime/engine.h"
#include "iwb/engine/synth/synth_model.h"
#include "iwb/engine/synth/synth_preset.h"

#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <functional>
#include <string>

using namespace iwb;
using namespace iwb::gguf;
using iwb::test::Change;
using iwb::test::Reshape;

namespace {

constexpr char kPreset[] = "test-qwen35";

// One flag per block, as llama.cpp's converter writes attention.recurrent_layers.
Value flags(const std::vector<bool>& is_recurrent) {
  Array a{ValueType::Bool, {}};
  for (const bool f : is_recurrent) a.items.push_back(Value::boolean(f));
  return Value::array(std::move(a));
}

}  // namespace

class TestQwen35Config : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_tmp;

  // test-qwen35 synthesized once, in F32 (8 blocks: 0-2 and 4-6 recurrent, 3 and 7 attention;
  // 2 key heads and 4 value heads of 64 in the delta net, a 4-tap convolution).
  std::string preset_file() { return test::synthesized_f32(kPreset, m_tmp.filePath("test-qwen35.gguf").toStdString()); }

  // The preset's file written again with `change`, at a path of its own.
  std::string changed_copy(const std::string& name, const Change& change) {
    return test::changed_copy(preset_file(), m_tmp.filePath(QString::fromStdString(name + ".gguf")).toStdString(),
                              change);
  }

  static Result<ModelConfig> config_of(const std::string& path) {
    auto file = GgufFile::open(path);
    if (!file.is_ok()) return file.status();
    return model_config_from_gguf(**file);
  }

 private slots:
  // The unchanged copy loads (the copies are faithful), and the keys say what the preset wrote:
  // the rows below then change one thing at a time from a file that works.
  void copyLoads() {
    const std::string path = changed_copy("copy", {});
    Result<ModelConfig> c = config_of(path);
    QVERIFY2(c.is_ok(), c.error_message().c_str());
    QCOMPARE(c->num_layers, int64_t(8));
    QCOMPARE(c->linear_conv_kernel, int64_t(4));
    QCOMPARE(c->linear_num_key_heads, int64_t(2));
    QCOMPARE(c->linear_num_value_heads, int64_t(4));
    QCOMPARE(c->linear_head_dim, int64_t(64));
    const std::vector<bool> every_fourth_attends = {true, true, true, false, true, true, true, false};
    QCOMPARE(c->is_recurrent_layer, every_fourth_attends);
    QVERIFY(c->has_attention_output_gate);
    auto engine = Engine::load(path, {0, 2});
    QVERIFY2(engine.is_ok(), engine.error_message().c_str());
  }

  // An explicit recurrent_layers array wins over the interval (llama.cpp reads it first), and
  // integer flags count as flags: a file laid out otherwise loads with its own layout.
  void recurrentLayersArrayIsRead() {
    Change change;
    change.metadata = [](GgufWriter& w) {
      w.set("qwen35.attention.recurrent_layers", Value::i32_array({1, 0, 1, 1, 1, 1, 0, 1}));
    };
    Result<ModelConfig> c = config_of(changed_copy("layers-array", change));
    QVERIFY2(c.is_ok(), c.error_message().c_str());
    const std::vector<bool> expected = {true, false, true, true, true, true, false, true};
    QCOMPARE(c->is_recurrent_layer, expected);
    // The attention layers keep their KV heads; the recurrent ones have none.
    QCOMPARE(c->layer_num_kv_heads(1), c->num_kv_heads);
    QCOMPARE(c->layer_num_kv_heads(0), int64_t(0));
  }

  // With a multi-token-prediction block after the trunk, recurrent_layers still holds one flag
  // per stored block (llama.cpp's converter counts the MTP block), and the trunk is one shorter.
  void recurrentLayersCountTheMtpBlocks() {
    Change change;
    change.metadata = [](GgufWriter& w) {
      w.set_u32("qwen35.nextn_predict_layers", 1);
      w.set("qwen35.attention.recurrent_layers", flags({true, true, false, true, true, true, false, false}));
    };
    Result<ModelConfig> c = config_of(changed_copy("mtp-array", change));
    QVERIFY2(c.is_ok(), c.error_message().c_str());
    QCOMPARE(c->num_layers, int64_t(7));
    QCOMPARE(c->num_nextn_layers, int64_t(1));
    const std::vector<bool> trunk = {true, true, false, true, true, true, false};
    QCOMPARE(c->is_recurrent_layer, trunk);
  }

  void badMetadataIsNamed_data() {
    QTest::addColumn<QString>("what");
    QTest::addColumn<QString>("expected");
    for (const char* k : {"conv_kernel", "state_size", "group_count", "time_step_rank", "inner_size"}) {
      QTest::newRow(qPrintable(QString("no ssm.") + k))
          << QString("drop:qwen35.ssm.") + k << QString("the model has no 'qwen35.ssm.") + k + "' metadata key";
    }
    QTest::newRow("zero taps") << "conv-zero"
                               << "'qwen35.ssm.conv_kernel' must be a positive integer";
    QTest::newRow("value heads not a multiple of key heads")
        << "rank-3"
        << "'qwen35.ssm.time_step_rank' (value heads, 3) is not a multiple of 'qwen35.ssm.group_count' (key heads, 2)";
    QTest::newRow("inner size not rank x state") << "inner-200"
                                                 << "'qwen35.ssm.inner_size' is 200, expected time_step_rank x "
                                                    "state_size = 256";
    QTest::newRow("recurrent_layers too short")
        << "layers-7"
        << "'qwen35.attention.recurrent_layers' must hold one flag per block (8)";
    QTest::newRow("recurrent_layers too long")
        << "layers-9"
        << "'qwen35.attention.recurrent_layers' must hold one flag per block (8)";
    QTest::newRow("recurrent_layers of strings") << "layers-text"
                                                 << "'qwen35.attention.recurrent_layers' must hold flags";
    QTest::newRow("every layer recurrent (array)") << "all-recurrent"
                                                   << "'qwen35.attention.recurrent_layers' marks every layer";
    QTest::newRow("every layer recurrent (interval)") << "interval-9"
                                                      << "'qwen35.full_attention_interval' makes every layer";
    QTest::newRow("zero interval") << "interval-0"
                                   << "'qwen35.full_attention_interval' must be a positive integer";
    QTest::newRow("too few M-RoPE sections") << "sections-2"
                                             << "'qwen35.rope.dimension_sections' must hold 4 sections";
    QTest::newRow("M-RoPE sections all zero") << "sections-0"
                                              << "'qwen35.rope.dimension_sections' must not be all zero";
    QTest::newRow("negative M-RoPE section") << "sections-negative"
                                             << "'qwen35.rope.dimension_sections' must hold counts";
    // Sections [1, 1, 1, 5] over 8 rotated pairs: pair 3 takes the fourth (unused for text)
    // component, which llama.cpp leaves unrotated and the engine's NeoX RoPE would rotate.
    QTest::newRow("M-RoPE pair on the fourth component")
        << "sections-fourth"
        << "'qwen35.rope.dimension_sections' leaves rotated pair 3 to the fourth position component";
    QTest::newRow("as many MTP layers as blocks") << "nextn-8"
                                                  << "'qwen35.nextn_predict_layers' must be fewer than the 8 blocks";
    QTest::newRow("more MTP layers than blocks") << "nextn-20"
                                                 << "'qwen35.nextn_predict_layers' must be fewer than the 8 blocks";
  }
  void badMetadataIsNamed() {
    QFETCH(QString, what);
    QFETCH(QString, expected);
    Change change;
    if (what.startsWith("drop:")) {
      change.dropped_key = what.mid(5).toStdString();
    } else if (what == "conv-zero") {
      change.metadata = [](GgufWriter& w) { w.set_u32("qwen35.ssm.conv_kernel", 0); };
    } else if (what == "rank-3") {
      change.metadata = [](GgufWriter& w) { w.set_u32("qwen35.ssm.time_step_rank", 3); };
    } else if (what == "inner-200") {
      change.metadata = [](GgufWriter& w) { w.set_u32("qwen35.ssm.inner_size", 200); };
    } else if (what == "layers-7") {
      change.metadata = [](GgufWriter& w) {
        w.set("qwen35.attention.recurrent_layers", flags({true, true, true, false, true, true, true}));
      };
    } else if (what == "layers-9") {
      change.metadata = [](GgufWriter& w) {
        w.set("qwen35.attention.recurrent_layers", flags({true, true, true, false, true, true, true, false, true}));
      };
    } else if (what == "layers-text") {
      change.metadata = [](GgufWriter& w) {
        w.set("qwen35.attention.recurrent_layers",
              Value::string_array({"yes", "yes", "yes", "no", "yes", "yes", "yes", "no"}));
      };
    } else if (what == "all-recurrent") {
      change.metadata = [](GgufWriter& w) {
        w.set("qwen35.attention.recurrent_layers", flags(std::vector<bool>(8, true)));
      };
    } else if (what == "interval-9") {
      change.metadata = [](GgufWriter& w) { w.set_u32("qwen35.full_attention_interval", 9); };
    } else if (what == "interval-0") {
      change.metadata = [](GgufWriter& w) { w.set_u32("qwen35.full_attention_interval", 0); };
    } else if (what.startsWith("sections-")) {
      const std::vector<int32_t> sections = what == "sections-2"          ? std::vector<int32_t>{3, 3}
                                            : what == "sections-0"        ? std::vector<int32_t>{0, 0, 0, 0}
                                            : what == "sections-negative" ? std::vector<int32_t>{3, -3, 2, 0}
                                                                          : std::vector<int32_t>{1, 1, 1, 5};
      change.metadata = [sections](GgufWriter& w) {
        w.set("qwen35.rope.dimension_sections", Value::i32_array(sections));
      };
    } else if (what == "nextn-8") {
      change.metadata = [](GgufWriter& w) { w.set_u32("qwen35.nextn_predict_layers", 8); };
    } else if (what == "nextn-20") {
      change.metadata = [](GgufWriter& w) { w.set_u32("qwen35.nextn_predict_layers", 20); };
    }
    const std::string path = changed_copy(QString(what).replace(':', '-').toStdString(), change);
    Result<ModelConfig> c = config_of(path);
    QVERIFY2(!c.is_ok(), qPrintable("accepted: " + what));
    QVERIFY2(c.error_message().find(expected.toStdString()) != std::string::npos, c.error_message().c_str());
    // The engine's load says the same (never a crash further on).
    auto engine = Engine::load(path, {0, 2});
    QVERIFY(!engine.is_ok());
    QVERIFY2(engine.error_message().find(expected.toStdString()) != std::string::npos, engine.error_message().c_str());
  }

  // A tensor a recurrent or gated attention layer needs, left out or of another shape: the load
  // names it (never a read past the tensor's end, which ASan would see).
  void badTensorsAreNamed_data() {
    QTest::addColumn<QString>("tensor");
    QTest::addColumn<bool>("is_reshaped");
    QTest::addColumn<QString>("expected");
    const QString missing = "the model is missing tensor '%1'";
    for (const char* name :
         {"blk.0.attn_qkv.weight", "blk.1.ssm_a", "blk.2.ssm_dt.bias", "blk.4.attn_gate.weight",
          "blk.5.ssm_beta.weight", "blk.6.ssm_norm.weight", "blk.0.ssm_out.weight", "blk.7.attn_q.weight"}) {
      QTest::newRow(qPrintable(QString("missing ") + name)) << name << false << missing.arg(name);
    }
    // The taps [kernel x channels] stored transposed, attn_q only as wide as the queries (the
    // gates missing), ssm_a for two of the four value heads.
    QTest::newRow("conv taps transposed")
        << "blk.0.ssm_conv1d.weight" << true << "tensor 'blk.0.ssm_conv1d.weight' has shape";
    QTest::newRow("attn_q without gates") << "blk.3.attn_q.weight" << true << "tensor 'blk.3.attn_q.weight' has shape";
    QTest::newRow("ssm_a too short") << "blk.2.ssm_a" << true << "tensor 'blk.2.ssm_a' has shape";
  }
  void badTensorsAreNamed() {
    QFETCH(QString, tensor);
    QFETCH(bool, is_reshaped);
    QFETCH(QString, expected);
    Change change;
    if (!is_reshaped) {
      change.dropped_tensor = tensor.toStdString();
    } else {
      change.reshaped.name = tensor.toStdString();
      if (tensor.endsWith("ssm_conv1d.weight")) {
        change.reshaped.shape = {512, 4};  // [channels x kernel] where [kernel x channels] belongs
      } else if (tensor.endsWith("attn_q.weight")) {
        change.reshaped.shape = {256, 256};  // n_embd x q_width, not n_embd x 2 q_width
      } else {
        change.reshaped.shape = {2};
      }
    }
    const std::string path =
        changed_copy((is_reshaped ? "shape-" : "missing-") + QString(tensor).replace('.', '-').toStdString(), change);
    auto engine = Engine::load(path, {0, 2});
    QVERIFY2(!engine.is_ok(), qPrintable("loaded without a good " + tensor));
    QVERIFY2(engine.error_message().find(expected.toStdString()) != std::string::npos, engine.error_message().c_str());
  }
};

QTEST_GUILESS_MAIN(TestQwen35Config)
#include "test_qwen35_config.moc"
