// The quantization lab's engine side: quantize -> dequantize error of every type within its
// bound on random data and on the real aidreams weights, the mix and fallback rules on a real
// model, imatrix files, perplexity (deterministic, sane, llama-perplexity's chunking), KL of a
// model against itself, the logits cache, and the results store's quant tables (migration from
// version 3, failed runs).
#include "aidreams_gguf.h"
#include "iwb/engine/convert/llama2c.h"
#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/quant/evaluation.h"
#include "iwb/engine/quant/imatrix.h"
#include "iwb/engine/quant/imatrix_collect.h"
#include "iwb/engine/quant/logits_cache.h"
#include "iwb/engine/quant/model_quantizer.h"
#include "iwb/engine/store/results_store.h"
#include "iwb/engine/synth/synth_model.h"
#include "iwb/kernels/dequantize.h"
#include "iwb/kernels/quantize.h"

#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <random>

using namespace iwb;

namespace {

// Relative RMS error bound of each type on Gaussian data (measured figures are about half of
// these: Q8_0 0.004, Q6_K 0.008, Q5_* 0.02-0.03, Q4_* 0.04-0.07, Q3_K 0.1, Q2_K 0.2; MXFP4, whose
// power-of-two scale wastes up to half its range, 0.12).
struct TypeBound {
  GgmlType type;
  double max_relative_rmse;
};
constexpr TypeBound kBounds[] = {
    {GgmlType::Q8_0, 0.008}, {GgmlType::Q6_K, 0.02}, {GgmlType::Q5_0, 0.05},  {GgmlType::Q5_1, 0.05},
    {GgmlType::Q5_K, 0.04},  {GgmlType::Q4_0, 0.10}, {GgmlType::Q4_1, 0.10},  {GgmlType::Q4_K, 0.08},
    {GgmlType::Q3_K, 0.20},  {GgmlType::Q2_K, 0.40}, {GgmlType::MXFP4, 0.20},
};

double relative_rmse(GgmlType type, const std::vector<float>& x, const float* imatrix = nullptr) {
  const auto n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(*ggml_row_bytes(type, n));
  std::vector<float> back(x.size());
  if (!quantize_row_ref(type, x.data(), q.data(), n, imatrix) || !dequantize_row_ref(type, q.data(), back.data(), n)) {
    return -1;
  }
  double err = 0, ref = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    err += (x[i] - back[i]) * (x[i] - back[i]);
    ref += x[i] * x[i];
  }
  return std::sqrt(err / ref);
}

void exec(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  QVERIFY(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  char* message = nullptr;
  const int rc = sqlite3_exec(db, sql, nullptr, nullptr, &message);
  const QByteArray text = message ? message : "";
  sqlite3_free(message);
  sqlite3_close(db);
  QVERIFY2(rc == SQLITE_OK, text.constData());
}

}  // namespace

class TestQuantLab : public QObject {
  Q_OBJECT

  QTemporaryDir m_tmp;
  QString m_model;  // aidreams converted to an F32 GGUF (empty without the shared models)

  quant::EvalOptions eval_options(const QString& model) const {
    quant::EvalOptions o;
    o.model_path = model.toStdString();
    o.text = quant::builtin_eval_text();
    o.context = 128;
    o.num_chunks = 6;
    o.num_threads = 2;
    o.num_gen_tokens = 0;
    return o;
  }

 private slots:
  void initTestCase() {
    qputenv("IWB_LOGITS_CACHE", m_tmp.filePath("logits").toUtf8());
    m_model = test::convert_aidreams_gguf(m_tmp.path());
  }

  void errorWithinBoundOnRandomData() {
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(256 * 12);
    for (float& v : x) v = normal(rng);
    for (const TypeBound& b : kBounds) {
      const double e = relative_rmse(b.type, x);
      QVERIFY2(e > 0 && e < b.max_relative_rmse,
               qPrintable(QString("%1: %2").arg(QString::fromStdString(std::string(ggml_type_name(b.type)))).arg(e)));
    }
    // More bits, less error: the bounds' order holds for the measured errors too.
    QVERIFY(relative_rmse(GgmlType::Q8_0, x) < relative_rmse(GgmlType::Q6_K, x));
    QVERIFY(relative_rmse(GgmlType::Q6_K, x) < relative_rmse(GgmlType::Q5_K, x));
    QVERIFY(relative_rmse(GgmlType::Q5_K, x) < relative_rmse(GgmlType::Q4_K, x));
    QVERIFY(relative_rmse(GgmlType::Q4_K, x) < relative_rmse(GgmlType::Q3_K, x));
    QVERIFY(relative_rmse(GgmlType::Q3_K, x) < relative_rmse(GgmlType::Q2_K, x));
  }

  void importanceLowersTheWeightedError() {
    // Channels with large importance get smaller error when the imatrix is used.
    std::mt19937 rng(11);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const int64_t n = 256;
    std::vector<float> x(n), importance(n);
    for (float& v : x) v = normal(rng);
    for (int64_t j = 0; j < n; ++j) importance[j] = (j % 16 == 0) ? 100.0f : 0.01f;
    for (GgmlType type : {GgmlType::Q4_K, GgmlType::Q3_K, GgmlType::Q4_0}) {
      std::vector<uint8_t> q(*ggml_row_bytes(type, n));
      std::vector<float> back(n);
      auto weighted_error = [&](const float* imatrix) {
        quantize_row_ref(type, x.data(), q.data(), n, imatrix);
        dequantize_row_ref(type, q.data(), back.data(), n);
        double e = 0;
        for (int64_t j = 0; j < n; ++j) e += importance[j] * (x[j] - back[j]) * (x[j] - back[j]);
        return e;
      };
      QVERIFY(weighted_error(importance.data()) < weighted_error(nullptr));
    }
  }

  void quantizesRealWeightsWithinBounds() {
    if (m_model.isEmpty()) QSKIP("shared models folder absent: no aidreams model");
    for (const char* type : {"Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "MXFP4"}) {
      quant::QuantizeOptions o;
      o.source_path = m_model.toStdString();
      o.output_path = m_tmp.filePath(QString("aid-%1.gguf").arg(type)).toStdString();
      o.type = type;
      o.num_threads = 2;
      auto r = quant::quantize_model(o);
      QVERIFY2(r.is_ok(), r.error_message().c_str());
      const GgmlType wanted = *ggml_type_from_name(type);
      double bound = 0;
      for (const TypeBound& b : kBounds) bound = b.type == wanted ? b.max_relative_rmse : bound;
      int num_quantized = 0;
      for (const quant::QuantizedTensor& t : r->tensors) {
        if (t.type != wanted) continue;
        ++num_quantized;
        // Real weights have heavier tails than Gaussian data: 1.5x the bound.
        QVERIFY2(t.relative_rmse > 0 && t.relative_rmse < 1.5 * bound, qPrintable(QString::fromStdString(t.name)));
      }
      // q, k, v, attn_output, gate and up of 4 layers (ffn_down's 172-wide rows fit no block
      // type); in a Q8_0 file the tied classifier too (Q6_K elsewhere, which its rows do not fit).
      QCOMPARE(num_quantized, 24 + (wanted == GgmlType::Q8_0 ? 1 : 0));
    }
  }

  void mixRulesAndFallbacksOnARealModel() {
    if (m_model.isEmpty()) QSKIP("shared models folder absent: no aidreams model");
    quant::QuantizeOptions o;
    o.source_path = m_model.toStdString();
    o.output_path = m_tmp.filePath("aid-q4km.gguf").toStdString();
    o.type = "q4_k_m";
    auto r = quant::quantize_model(o);
    QVERIFY2(r.is_ok(), r.error_message().c_str());
    auto file = gguf::GgufFile::open(o.output_path);
    QVERIFY2(file.is_ok(), file.error_message().c_str());
    QCOMPARE((*file)->get_int("general.file_type").value_or(-1), int64_t{15});
    QCOMPARE((*file)->get_string("general.name").value_or(""), std::string("aidreams260K"));  // metadata copied
    for (const quant::QuantizedTensor& t : r->tensors) {
      const gguf::TensorInfo* info = (*file)->find_tensor(t.name);
      QVERIFY(info != nullptr);
      QCOMPARE(info->type, t.type);
      if (t.shape.size() == 1) {
        QCOMPARE(t.type, GgmlType::F32);  // norms stay F32
      } else if (t.kind == "ffn_down") {
        QVERIFY(t.is_fallback);            // 172-wide rows fit no block type
        QCOMPARE(t.type, GgmlType::F16);
      } else if (t.kind == "token_embd") {
        QCOMPARE(t.type, GgmlType::Q8_0);  // the tied classifier: Q8_0 when Q4_K does not fit
      } else if (t.kind == "attn_v" && t.layer >= 2) {
        QCOMPARE(t.wanted, GgmlType::Q6_K);  // use_more_bits: the last eighth
      } else {
        QCOMPARE(t.wanted, GgmlType::Q4_K);
        QCOMPARE(t.type, GgmlType::Q5_0);    // 64-wide rows: Q4_K's 32-element stand-in
      }
    }
    // llama.cpp's imatrix rule: Q4_0/Q5_0 files give the first eighth of ffn_down the "_1" type.
    synth::TensorTypeQuery ffn;
    ffn.role = synth::TensorRole::FfnDown;
    ffn.row_length = 8960;
    ffn.layer = 2;
    ffn.num_layers = 28;
    const auto q4_0 = *synth::parse_weight_type("Q4_0");
    QCOMPARE(synth::choose_tensor_type(q4_0, ffn).type, GgmlType::Q4_0);
    ffn.has_imatrix = true;
    QCOMPARE(synth::choose_tensor_type(q4_0, ffn).type, GgmlType::Q4_1);
    QCOMPARE(synth::choose_tensor_type(*synth::parse_weight_type("Q5_0"), ffn).type, GgmlType::Q5_1);
    ffn.layer = 3;  // 28 / 8 = 3: layers 0..2 only
    QCOMPARE(synth::choose_tensor_type(q4_0, ffn).type, GgmlType::Q4_0);
    // MXFP4: every weight (no imatrix rule), the classifier Q8_0 as in llama.cpp's MXFP4_MOE files
    // (file type 38), rows of no whole block F16.
    const auto mxfp4 = *synth::parse_weight_type("mxfp4");
    QCOMPARE(mxfp4.base_type, GgmlType::MXFP4);
    QCOMPARE(mxfp4.file_type, 38u);
    QCOMPARE(synth::choose_tensor_type(mxfp4, ffn).type, GgmlType::MXFP4);
    synth::TensorTypeQuery classifier;
    classifier.role = synth::TensorRole::Output;
    classifier.is_classifier = true;
    classifier.row_length = 1536;
    QCOMPARE(synth::choose_tensor_type(mxfp4, classifier).type, GgmlType::Q8_0);
    ffn.row_length = 172;
    QCOMPARE(synth::choose_tensor_type(mxfp4, ffn).type, GgmlType::F16);

    // The source's own type changes nothing; output over the source is refused.
    o.output_path = o.source_path;
    QVERIFY(!quant::quantize_model(o).is_ok());
  }

  void imatrixReachesPhi3FusedQkv() {
    // Our imatrix names the row views of phi3's attn_qkv attn_q/k/v (they share one input): the
    // quantizer takes attn_q's channels for the fused tensor. ffn_up's input is the same for
    // llama's ffn_up and phi3's fused gate/up, so its name already matches.
    synth::SynthOptions so;
    so.shape = *synth::find_synth_preset("test-phi3");
    so.weight_type = "F32";
    so.num_threads = 2;
    so.output_path = m_tmp.filePath("phi3-f32.gguf").toStdString();
    QVERIFY(synth::synthesize_model(so).is_ok());
    quant::Imatrix m;
    m.num_chunks = 1;
    for (int layer = 0; layer < 2; ++layer) {
      for (const char* kind : {"attn_q", "ffn_up"}) {
        quant::ImatrixEntry& e = m.entries["blk." + std::to_string(layer) + "." + kind + ".weight"];
        e.sum_squares.assign(192, 1.0);
        e.sum_squares[7] = 50.0;
        e.num_rows = 1;
        e.num_calls = 1;
      }
    }
    quant::QuantizeOptions o;
    o.source_path = so.output_path;
    o.output_path = m_tmp.filePath("phi3-q4_0.gguf").toStdString();
    o.type = "Q4_0";
    o.imatrix = &m;
    o.num_threads = 2;
    auto r = quant::quantize_model(o);
    QVERIFY2(r.is_ok(), r.error_message().c_str());
    int num_fused = 0;
    for (const quant::QuantizedTensor& t : r->tensors) {
      if (t.kind != "attn_qkv" && t.kind != "ffn_up") continue;
      ++num_fused;
      QVERIFY2(t.used_imatrix, t.name.c_str());
    }
    QCOMPARE(num_fused, 4);
  }

  void imatrixCountsEachExpertApart() {
    // A mixture of experts: each expert's channels over the rows routed to it (llama-imatrix's
    // per-expert statistics), written and read in the legacy file, and each expert's rows
    // quantized with its own slice.
    synth::SynthOptions so;
    so.shape = *synth::find_synth_preset("test-qwen3moe");  // 2 layers, 8 experts of 256, 2 per token
    so.weight_type = "F32";
    so.num_threads = 2;
    so.output_path = m_tmp.filePath("moe-f32.gguf").toStdString();
    QVERIFY(synth::synthesize_model(so).is_ok());
    quant::ImatrixOptions io;
    io.model_path = so.output_path;
    io.text = std::string(4000, 'a') + "the quick brown fox jumps over the lazy dog, again and again. ";
    for (int i = 0; i < 6; ++i) io.text += io.text.substr(0, 700);
    io.context = 128;
    io.num_chunks = 3;
    io.num_threads = 2;
    auto m = quant::collect_imatrix(io);
    QVERIFY2(m.is_ok(), m.error_message().c_str());
    for (const char* kind : {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"}) {
      const std::string name = std::string("blk.1.") + kind + ".weight";
      QVERIFY2(m->entries.count(name), name.c_str());
      const quant::ImatrixEntry& e = m->entries.at(name);
      QCOMPARE(e.expert_rows.size(), size_t{8});
      QCOMPARE(e.sum_squares.size(), size_t{8 * 256});
      int64_t routed = 0;
      for (int64_t rows : e.expert_rows) routed += rows;
      QCOMPARE(routed, int64_t{2 * 3 * 128});  // k experts for every token of every chunk
      QCOMPARE(e.num_rows, routed);
      QVERIFY(e.num_calls >= 1);
      const std::vector<float> importance = m->importance(name);
      QCOMPARE(importance.size(), size_t{8 * 256});
      for (size_t x = 0; x < 8; ++x) {
        if (e.expert_rows[x] == 0) {
          QCOMPARE(importance[x * 256], 1.0f);  // no data: 1, as llama-imatrix writes it
        } else {
          QCOMPARE(importance[x * 256 + 3], float(e.sum_squares[x * 256 + 3] / double(e.expert_rows[x])));
        }
      }
    }
    QVERIFY(m->entries.count("blk.0.attn_q.weight"));  // the dense ones as before
    QVERIFY(!m->entries.count("blk.0.ffn_gate_inp.weight") ||
            m->entries.at("blk.0.ffn_gate_inp.weight").expert_rows.empty());

    // The legacy file keeps each expert's means.
    const std::string path = m_tmp.filePath("moe.imatrix").toStdString();
    QVERIFY(quant::write_imatrix_file(*m, path).is_ok());
    auto back = quant::read_imatrix_file(path);
    QVERIFY2(back.is_ok(), back.error_message().c_str());
    const std::vector<float> a = m->importance("blk.0.ffn_down_exps.weight");
    const std::vector<float> b = back->importance("blk.0.ffn_down_exps.weight");
    QCOMPARE(a.size(), b.size());
    for (size_t j = 0; j < a.size(); ++j) QVERIFY(std::abs(a[j] - b[j]) <= 1e-5f * std::max(1.0f, a[j]));

    // Each expert's rows use its own slice: making expert 5's channel 7 matter changes expert
    // 5's quantized rows of blk.0.ffn_up_exps and no other expert's.
    auto quantize_with = [&](const quant::Imatrix& imatrix, const std::string& out) -> std::vector<uint8_t> {
      quant::QuantizeOptions o;
      o.source_path = so.output_path;
      o.output_path = m_tmp.filePath(QString::fromStdString(out)).toStdString();
      o.type = "Q4_K";
      o.imatrix = &imatrix;
      o.num_threads = 2;
      auto r = quant::quantize_model(o);
      if (!r.is_ok()) return {};
      for (const quant::QuantizedTensor& t : r->tensors) {
        if (t.name == "blk.0.ffn_up_exps.weight" && !t.used_imatrix) return {};
      }
      for (const std::string& w : r->warnings) {
        if (w.find("channels") != std::string::npos) return {};
      }
      auto file = gguf::GgufFile::open(o.output_path);
      const std::span<const uint8_t> data = (*file)->tensor_data(*(*file)->find_tensor("blk.0.ffn_up_exps.weight"));
      return {data.begin(), data.end()};
    };
    quant::Imatrix flat;
    quant::ImatrixEntry& f = flat.entries["blk.0.ffn_up_exps.weight"];
    f.sum_squares.assign(8 * 256, 1.0);
    f.num_rows = 1;
    f.num_calls = 1;
    quant::Imatrix bent = flat;
    bent.entries["blk.0.ffn_up_exps.weight"].sum_squares[5 * 256 + 7] = 1000.0;
    const std::vector<uint8_t> flat_bytes = quantize_with(flat, "moe-flat.gguf");
    const std::vector<uint8_t> bent_bytes = quantize_with(bent, "moe-bent.gguf");
    QVERIFY(!flat_bytes.empty() && flat_bytes.size() == bent_bytes.size());
    const size_t per_expert = flat_bytes.size() / 8;
    for (size_t x = 0; x < 8; ++x) {
      const bool same = std::equal(flat_bytes.begin() + x * per_expert, flat_bytes.begin() + (x + 1) * per_expert,
                                   bent_bytes.begin() + x * per_expert);
      QVERIFY2(same == (x != 5), qPrintable(QString("expert %1").arg(x)));
    }
  }

  void imatrixFileRoundTrip() {
    quant::Imatrix m;
    m.num_chunks = 3;
    m.dataset = "calibration.txt";
    quant::ImatrixEntry& e = m.entries["blk.0.attn_q.weight"];
    e.sum_squares = {4.0, 8.0, 0.5};
    e.num_rows = 4;
    e.num_calls = 2;
    const std::string path = m_tmp.filePath("m.imatrix").toStdString();
    QVERIFY(quant::write_imatrix_file(m, path).is_ok());
    auto back = quant::read_imatrix_file(path);
    QVERIFY2(back.is_ok(), back.error_message().c_str());
    QCOMPARE(back->num_chunks, 3);
    QCOMPARE(back->dataset, std::string("calibration.txt"));
    const std::vector<float> importance = back->importance("blk.0.attn_q.weight");
    QCOMPARE(importance.size(), size_t{3});
    QCOMPARE(importance[0], 1.0f);
    QCOMPARE(importance[1], 2.0f);
    QCOMPARE(importance[2], 0.125f);
    QVERIFY(back->importance("missing").empty());
    // A truncated file is refused with a message.
    QFile f(QString::fromStdString(path));
    QVERIFY(f.open(QIODevice::ReadWrite));
    QVERIFY(f.resize(20));
    f.close();
    auto broken = quant::read_imatrix_file(path);
    QVERIFY(!broken.is_ok());
    QVERIFY2(broken.error_message().find("truncated") != std::string::npos, broken.error_message().c_str());
  }

  void chunkPlanMatchesLlamaPerplexity() {
    auto p = quant::plan_chunks(1000, 128, 0, 0);
    QVERIFY(p.is_ok());
    QCOMPARE(p->starts.size(), size_t{7});  // 1000 / 128
    QCOMPARE(p->starts[1], int64_t{128});
    QCOMPARE(p->first_scored, int64_t{64});  // positions 64..126 score tokens 65..127
    p = quant::plan_chunks(1000, 128, 0, 3);
    QCOMPARE(p->starts.size(), size_t{3});
    p = quant::plan_chunks(1000, 128, 32, 0);
    QVERIFY(p.is_ok());
    QCOMPARE(p->starts.size(), size_t{(1000 - 128 + 31) / 32});
    QCOMPARE(p->first_scored, int64_t{128 - 32 - 1});
    QVERIFY(!quant::plan_chunks(100, 128, 0, 0).is_ok());
    QVERIFY(!quant::plan_chunks(1000, 128, 128, 0).is_ok());
  }

  void perplexityIsDeterministicAndSane() {
    if (m_model.isEmpty()) QSKIP("shared models folder absent: no aidreams model");
    auto a = quant::evaluate(eval_options(m_model));
    QVERIFY2(a.is_ok(), a.error_message().c_str());
    auto b = quant::evaluate(eval_options(m_model));
    QVERIFY2(b.is_ok(), b.error_message().c_str());
    QCOMPARE(a->perplexity, b->perplexity);
    QCOMPARE(a->num_chunks, int64_t{6});
    QCOMPARE(a->num_scored, int64_t{6 * 63});
    // Far better than guessing among 512 tokens, and not impossibly good.
    QVERIFY2(a->perplexity > 5 && a->perplexity < 400, qPrintable(QString::number(a->perplexity)));
    QVERIFY(a->perplexity_error > 0 && a->perplexity_error < a->perplexity);
    // Per chunk: equal chunks, so their means average to the whole text's, and they differ.
    QCOMPARE(a->chunk_mean_nll.size(), size_t{6});
    double sum = 0;
    for (const double v : a->chunk_mean_nll) sum += v;
    QVERIFY2(std::abs(sum / 6 - a->mean_nll) < 1e-9, qPrintable(QString::number(sum / 6 - a->mean_nll)));
    QVERIFY(*std::min_element(a->chunk_mean_nll.begin(), a->chunk_mean_nll.end()) <
            *std::max_element(a->chunk_mean_nll.begin(), a->chunk_mean_nll.end()));
    QVERIFY(a->base_chunk_mean_nll.empty());
  }

  void klOfAModelAgainstItselfIsZero() {
    if (m_model.isEmpty()) QSKIP("shared models folder absent: no aidreams model");
    quant::EvalOptions o = eval_options(m_model);
    o.base_path = m_model.toStdString();
    auto first = quant::evaluate(o);  // computes and caches the base
    QVERIFY2(first.is_ok(), first.error_message().c_str());
    QVERIFY(!first->was_base_cached);
    auto self = quant::evaluate(o);   // from the cache
    QVERIFY2(self.is_ok(), self.error_message().c_str());
    QVERIFY(self->was_base_cached);
    QVERIFY2(self->kl_mean < 1e-6 && self->kl_max < 1e-5, qPrintable(QString::number(self->kl_max)));
    QCOMPARE(self->top1_agreement, 1.0);
    QVERIFY(std::abs(self->delta_p_mean) < 1e-6 && self->delta_p_rms < 1e-6);
    QVERIFY(std::abs(self->base_perplexity - self->perplexity) < 1e-4 * self->perplexity);
    QVERIFY2(std::abs(self->ln_ppl_ratio) < 1e-6 && self->ln_ppl_ratio_error < 1e-6,
             qPrintable(QString::number(self->ln_ppl_ratio_error)));
    QCOMPARE(self->base_chunk_mean_nll.size(), self->chunk_mean_nll.size());
    for (size_t c = 0; c < self->chunk_mean_nll.size(); ++c)
      QVERIFY(std::abs(self->base_chunk_mean_nll[c] - self->chunk_mean_nll[c]) < 1e-5);

    // A 4-bit copy diverges measurably, and less than a 2-bit-scale one would.
    const QString q4 = m_tmp.filePath("aid-Q4_0.gguf");
    if (!QFile::exists(q4)) QSKIP("quantizesRealWeightsWithinBounds did not run");
    quant::EvalOptions oq = o;
    oq.model_path = q4.toStdString();
    auto r = quant::evaluate(oq);
    QVERIFY2(r.is_ok(), r.error_message().c_str());
    QVERIFY(r->was_base_cached);
    QVERIFY2(r->kl_mean > 1e-3 && r->kl_mean < 0.5, qPrintable(QString::number(r->kl_mean)));
    QVERIFY(r->kl_median <= r->kl_p99 && r->kl_p99 <= r->kl_max);
    QVERIFY(r->top1_agreement > 0.6 && r->top1_agreement < 1.0);
    // llama-perplexity's PPL(Q)/PPL(base): the quotient of the two perplexities, with a standard
    // error from the per-token differences, smaller than the perplexity's own relative error
    // (the same tokens are hard for both).
    QVERIFY2(std::abs(r->ppl_ratio - r->perplexity / r->base_perplexity) < 1e-9 * r->ppl_ratio,
             qPrintable(QString::number(r->ppl_ratio)));
    QVERIFY(r->ppl_ratio_error > 0);
    QVERIFY2(r->ppl_ratio_error / r->ppl_ratio < r->perplexity_error / r->perplexity,
             qPrintable(QString("%1 %2").arg(r->ppl_ratio_error).arg(r->perplexity_error / r->perplexity)));
  }

  void eightBitKvCacheAgainstF16() {
    // A synthetic llama of real structure (head size 64, GQA), F16 weights.
    synth::SynthOptions so;
    so.shape = *synth::find_synth_preset("test-llama");
    so.weight_type = "F16";
    so.output_path = m_tmp.filePath("synth-llama.gguf").toStdString();
    so.num_threads = 2;
    auto made = synth::synthesize_model(so);
    QVERIFY2(made.is_ok(), made.error_message().c_str());
    quant::EvalOptions o = eval_options(QString::fromStdString(so.output_path));
    o.base_path = so.output_path;
    o.num_chunks = 3;
    auto f16 = quant::evaluate(o);
    QVERIFY2(f16.is_ok(), f16.error_message().c_str());
    o.kv_cache_type = "q8_0";
    auto q8 = quant::evaluate(o);
    QVERIFY2(q8.is_ok(), q8.error_message().c_str());
    // Same file, 8-bit keys and values: a small divergence, and about half the KV memory.
    QVERIFY2(q8->kl_mean > f16->kl_mean && q8->kl_mean < 1e-2, qPrintable(QString::number(q8->kl_mean)));
    QVERIFY(std::abs(q8->perplexity - f16->perplexity) < 0.01 * f16->perplexity);
    QVERIFY(q8->top1_agreement > 0.9);
    QVERIFY(q8->memory_bytes < f16->memory_bytes);
    // 4-bit keys and 8-bit values (llama.cpp's -ctk q4_0 -ctv q8_0): more divergence, less memory.
    o.kv_cache_type = "q4_0/q8_0";
    auto q4 = quant::evaluate(o);
    QVERIFY2(q4.is_ok(), q4.error_message().c_str());
    QVERIFY2(q4->kl_mean > q8->kl_mean, qPrintable(QString::number(q4->kl_mean)));
    QVERIFY(q4->memory_bytes < q8->memory_bytes);
    o.kv_cache_type = "q6_k";  // not a KV cache type
    QVERIFY(!quant::evaluate(o).is_ok());
    // aidreams' heads are 16 wide: no whole Q8_0 block, refused with a message.
    if (m_model.isEmpty()) return;
    quant::EvalOptions a = eval_options(m_model);
    a.kv_cache_type = "q8_0";
    auto refused = quant::evaluate(a);
    QVERIFY(!refused.is_ok());
    QVERIFY2(refused.error_message().find("multiples of 32") != std::string::npos, refused.error_message().c_str());
  }

  void logitsCacheRoundTrip() {
    const std::string path = m_tmp.filePath("rows.logp").toStdString();
    const std::string key = quant::logits_cache_key("size=1;fnv=2", quant::hash_text("text"), 64, 0, 2);
    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::vector<std::vector<float>> rows(5, std::vector<float>(300));
    for (auto& r : rows) for (float& v : r) v = normal(rng);
    {
      auto w = quant::LogitsCacheWriter::create(path, key, 300);
      QVERIFY2(w.is_ok(), w.error_message().c_str());
      for (size_t i = 0; i < rows.size(); ++i) QVERIFY(w->add(rows[i], static_cast<int32_t>(i * 7)).is_ok());
      QVERIFY(w->finish().is_ok());
    }
    QVERIFY(!quant::LogitsCacheReader::open(path, key + "x").is_ok());  // another key is refused
    auto r = quant::LogitsCacheReader::open(path, key);
    QVERIFY2(r.is_ok(), r.error_message().c_str());
    QCOMPARE(r->num_rows(), int64_t{5});
    quant::BaseRow row;
    for (size_t i = 0; i < rows.size(); ++i) {
      QVERIFY(r->next(&row).is_ok());
      const auto& z = rows[i];
      double sum = 0;
      const float max = *std::max_element(z.begin(), z.end());
      for (const float v : z) sum += std::exp(v - max);
      const double lse = max + std::log(sum);
      QCOMPARE(row.argmax, static_cast<int32_t>(std::max_element(z.begin(), z.end()) - z.begin()));
      QVERIFY(std::abs(row.log_prob_next - (z[i * 7] - lse)) < 1e-5);
      for (size_t j = 0; j < z.size(); ++j) {
        const double exact = z[j] - lse;
        if (exact > -20) QVERIFY2(std::abs(row.log_probs[j] - exact) < 1e-3, qPrintable(QString::number(j)));
      }
    }
    QVERIFY(!r->next(&row).is_ok());  // no sixth row
  }

  void storeMigratesVersion3AndMarksFailedRuns() {
    const std::string path = m_tmp.filePath("v3.sqlite").toStdString();
    // A version-3 file with one probe.
    {
      auto store = ResultsStore::open(path);
      QVERIFY(store.is_ok());
    }
    exec(path, "DROP TABLE quant_tensor_errors; DROP TABLE quant_runs; PRAGMA user_version = 3;"
               "INSERT INTO probes (device_id, device_name, date, num_threads, copy_bytes_per_s, triad_bytes_per_s,"
               " peak_flops, peak_flops_kind, buffer_bytes) VALUES ('cpu', 'Old CPU', '2025-01-01T00:00:00Z', 2, 4e10,"
               " 3.5e10, 2.5e11, 'f32 FMA', 1024);");
    auto store = ResultsStore::open(path);
    QVERIFY2(store.is_ok(), store.error_message().c_str());
    QCOMPARE(*(*store)->file_schema_version(), ResultsStore::schema_version());
    auto probe = (*store)->latest_probe("cpu");
    QVERIFY(probe.is_ok() && probe->has_value());
    QCOMPARE((*probe)->device_name, std::string("Old CPU"));  // old rows kept

    quant::QuantRun run;
    run.kind = "eval";
    run.date = quant::utc_now();
    run.model_identity = "size=1;x";
    run.weight_type = "Q4_0";
    auto id = (*store)->add_quant_run(run);
    QVERIFY2(id.is_ok(), id.error_message().c_str());
    run.id = *id;
    run.perplexity = 12.5;
    QVERIFY((*store)->update_quant_run(run).is_ok());
    QVERIFY((*store)->finish_quant_run(run.id, quant::RunStatus::Failed, "the model file vanished").is_ok());
    auto second = (*store)->add_quant_run(run);  // a new run never replaces an old one
    QVERIFY(second.is_ok() && *second != run.id);
    QVERIFY((*store)->finish_quant_run(*second, quant::RunStatus::Done, {}).is_ok());
    quant::QuantizedTensor t;
    t.name = "blk.0.attn_q.weight";
    t.kind = "attn_q";
    t.layer = 0;
    t.type = GgmlType::Q4_0;
    t.wanted = GgmlType::Q4_K;
    t.is_fallback = true;
    t.relative_rmse = 0.07;
    QVERIFY((*store)->add_quant_tensor_errors(*second, {t}).is_ok());

    auto runs = (*store)->list_quant_runs();
    QVERIFY(runs.is_ok());
    QCOMPARE(runs->size(), size_t{2});
    QCOMPARE(runs->at(0).status, quant::RunStatus::Failed);
    QCOMPARE(runs->at(0).error, std::string("the model file vanished"));
    QCOMPARE(runs->at(0).perplexity.value_or(0), 12.5);
    QVERIFY(!runs->at(0).kl_mean.has_value());
    QCOMPARE(runs->at(1).status, quant::RunStatus::Done);
    auto errors = (*store)->quant_tensor_errors(*second);
    QVERIFY(errors.is_ok());
    QCOMPARE(errors->size(), size_t{1});
    QCOMPARE(errors->front().wanted, GgmlType::Q4_K);
    QVERIFY(errors->front().is_fallback);
    QCOMPARE(errors->front().relative_rmse, 0.07);
  }
};

QTEST_GUILESS_MAIN(TestQuantLab)
#include "test_quant_lab.moc"
