// `iwb synth`: lists its presets, writes a small model whose summary matches the file, reports
// row fallbacks, and answers bad usage with exit 2 and impossible requests with exit 1.
#include "iwb_process.h"

#include "iwb/engine/gguf/gguf_file.h"

#include <QFileInfo>
#include <QTemporaryDir>
#include <QtTest>

using iwb::test::run_iwb;

class TestCliSynth : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_tmp;

 private slots:
  void listsPresetsAndTypes() {
    auto r = run_iwb({"synth", "--list"});
    QCOMPARE(r.exit_code, 0);
    for (const char* name :
         {"llama-3.2-1b", "llama-3-8b", "tinyllama-1.1b", "qwen2.5-0.5b", "gemma-3-270m", "Q4_K_M"}) {
      QVERIFY2(r.out.contains(name), name);
    }
    QVERIFY2(r.out.contains("width 2048, 16 layers, 32 heads (8 KV) of 64, FFN 8192, vocab 128256"), qPrintable(r.out));
    QVERIFY2(r.out.contains("qwen3-30b-a3b   qwen3moe Qwen3 30B-A3B: width 2048, 48 layers, 32 heads (4 KV) of 128, "
                            "FFN 6144, 128 experts of 768, 8 per token, vocab 151936"),
             qPrintable(r.out));
  }

  void writesASmallModel() {
    const QString out = m_tmp.filePath("qwen.gguf");
    auto r = run_iwb({"synth", "--preset", "test-qwen2", "--type", "q4_k_m", "--seed", "3", "-t", "1", "-o", out});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains("as Q4_K_M, seed 3"), qPrintable(r.out));
    QVERIFY2(r.out.contains("rows of 192 do not fit Q4_K, written as Q5_0"), qPrintable(r.out));
    QVERIFY2(r.out.contains(QString("(%1 bytes)").arg(QFileInfo(out).size())), qPrintable(r.out));
    auto file = iwb::gguf::GgufFile::open(out.toStdString());
    QVERIFY2(file.is_ok(), file.error_message().c_str());
    QCOMPARE((*file)->get_int("general.file_type").value_or(-1), int64_t{15});
    QCOMPARE((*file)->get_string("general.name").value_or(""), std::string("synthetic test-qwen2"));
    QVERIFY2(r.err.contains("100.0%"), qPrintable(r.err));  // progress reached the end
  }

  void keepsTheFirstLayers() {
    const QString out = m_tmp.filePath("phi3-1.gguf");
    auto r = run_iwb({"synth", "--preset", "test-phi3", "--layers", "1", "--type", "F32", "-t", "1", "-o", out});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    auto file = iwb::gguf::GgufFile::open(out.toStdString());
    QVERIFY2(file.is_ok(), file.error_message().c_str());
    QCOMPARE((*file)->get_int("phi3.block_count").value_or(-1), int64_t{1});
    QVERIFY((*file)->find_tensor("blk.0.attn_qkv.weight") && !(*file)->find_tensor("blk.1.attn_qkv.weight"));
  }

  void badUsageAndImpossibleRequests() {
    QCOMPARE(run_iwb({"synth", "--type", "Q4_0", "-o", m_tmp.filePath("x.gguf")}).exit_code, 2);  // no preset
    auto r = run_iwb({"synth", "--preset", "llama-9000", "-o", m_tmp.filePath("x.gguf")});
    QCOMPARE(r.exit_code, 2);
    QVERIFY2(r.err.contains("unknown preset 'llama-9000'"), qPrintable(r.err));
    QCOMPARE(run_iwb({"synth", "--preset", "test-llama", "--seed", "-4", "-o", m_tmp.filePath("x.gguf")}).exit_code, 2);
    r = run_iwb({"synth", "--preset", "test-llama", "--type", "IQ2_XXS", "-o", m_tmp.filePath("x.gguf")});
    QCOMPARE(r.exit_code, 1);
    QVERIFY2(r.err.contains("unknown weight type 'IQ2_XXS'"), qPrintable(r.err));
    QVERIFY(!QFileInfo::exists(m_tmp.filePath("x.gguf")));
    r = run_iwb({"synth", "--preset", "test-qwen3moe", "--layers", "3", "-o", m_tmp.filePath("x.gguf")});
    QCOMPARE(r.exit_code, 2);
    QVERIFY2(r.err.contains("--layers must be 1 to the preset's 2"), qPrintable(r.err));
    r = run_iwb({"synth", "--preset", "test-qwen3", "--nextn-layers", "1", "-o", m_tmp.filePath("x.gguf")});
    QCOMPARE(r.exit_code, 2);
    QVERIFY2(r.err.contains("qwen3 has no multi-token-prediction layers"), qPrintable(r.err));
  }

  // Qwen 3.5's prediction block, as llama.cpp's converter writes it: an attention layer (query
  // with gate, q/k norms) after the recurrent trunk, with the nextn.* tensors.
  void writesQwen35sPredictionBlock() {
    const QString out = m_tmp.filePath("qwen35-mtp.gguf");
    auto r =
        run_iwb({"synth", "--preset", "test-qwen35", "--nextn-layers", "1", "--type", "F32", "-t", "1", "-o", out});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    auto file = iwb::gguf::GgufFile::open(out.toStdString());
    QVERIFY2(file.is_ok(), file.error_message().c_str());
    QCOMPARE((*file)->get_int("qwen35.block_count").value_or(-1), int64_t{9});
    QCOMPARE((*file)->get_int("qwen35.nextn_predict_layers").value_or(-1), int64_t{1});
    for (const char* name : {"blk.8.attn_q.weight", "blk.8.attn_q_norm.weight", "blk.8.nextn.eh_proj.weight",
                             "blk.8.nextn.enorm.weight", "blk.8.nextn.hnorm.weight"}) {
      QVERIFY2((*file)->find_tensor(name) != nullptr, name);
    }
    QVERIFY((*file)->find_tensor("blk.8.ssm_conv1d.weight") == nullptr);  // (9 % 4 != 0: not a trunk rule)
  }

  void keepsTheFirstLayersOfABigShape() {
    // One layer of qwen3-30b-a3b's real size would be a 1.2 GB file: test-qwen3moe's first layer
    // shows the option, the full shape is in docs/moe.md.
    const QString out = m_tmp.filePath("moe1.gguf");
    auto r = run_iwb({"synth", "--preset", "test-qwen3moe", "--layers", "1", "--type", "Q8_0", "-t", "1", "-o", out});
    QCOMPARE(r.exit_code, 0);
    QVERIFY2(
        r.out.contains("qwen3moe: width 256, 1 layers, 4 heads (2 KV) of 64, FFN 512, 8 experts of 256, 2 per token"),
        qPrintable(r.out));
    auto info = run_iwb({"info", out});
    QCOMPARE(info.exit_code, 0);
    QVERIFY2(info.out.contains("experts 8 per layer, 2 per token, expert feed-forward 256"), qPrintable(info.out));
  }
};

QTEST_GUILESS_MAIN(TestCliSynth)
#include "test_cli_synth.moc"
