// Model summary and memory estimate from GGUF metadata: parameter counts, file type names,
// and a GQA-aware KV cache size checked against Llama-3-8B's known figure; Qwen 3.5's recurrent
// layers (no KV cache, a state per sequence) as the engine loads them.
#include "iwb/engine/backend/cuda_scratch_estimate.h"
#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/gguf/gguf_writer.h"
#include "iwb/engine/model/llama_model_desc.h"
#include "iwb/engine/model/model_info.h"
#include "iwb/engine/runtime/engine.h"
#include "iwb/engine/runtime/kv_pool_estimate.h"
#include "iwb/engine/synth/synth_model.h"

#include <QTemporaryDir>
#include <QtTest>

#include <cmath>

using namespace iwb;
using namespace iwb::gguf;

namespace {

// Llama-3-8B's header (no real weights: one small tensor stands in).
std::unique_ptr<GgufFile> llama3_8b_header(bool with_file_type) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", "Llama-3-8B shape");
  if (with_file_type) w.set_u32("general.file_type", 15);
  w.set_u32("llama.context_length", 8192);
  w.set_u32("llama.embedding_length", 4096);
  w.set_u32("llama.feed_forward_length", 14336);
  w.set_u32("llama.block_count", 32);
  w.set_u32("llama.attention.head_count", 32);
  w.set_u32("llama.attention.head_count_kv", 8);
  w.set_f32("llama.rope.freq_base", 500000.0f);
  w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_u32("llama.vocab_size", 128256);
  std::vector<uint8_t> q4k(144 * 2), f16(2 * 64);
  (void)w.add_tensor("blk.0.attn_q.weight", {256, 2}, GgmlType::Q4_K, q4k);
  (void)w.add_tensor("blk.0.attn_norm.weight", {64}, GgmlType::F16, f16);
  return std::move(GgufFile::from_bytes(w.write_bytes().value()).value());
}

// Qwen3.5-9B's header: 32 layers, every 4th attending (16 heads over 4 KV heads of 256), the
// others a gated delta net of 16 key and 32 value heads of 128 with a 4-tap convolution.
// `recurrent`: attention.recurrent_layers' flags instead of the interval; `is_broken`: no
// ssm.state_size, which the loader refuses.
std::unique_ptr<GgufFile> qwen35_9b_header(const std::vector<bool>& recurrent = {}, bool is_broken = false) {
  GgufWriter w;
  w.set_string("general.architecture", "qwen35");
  w.set_u32("qwen35.context_length", 262144);
  w.set_u32("qwen35.embedding_length", 4096);
  w.set_u32("qwen35.feed_forward_length", 12288);
  w.set_u32("qwen35.block_count", 32);
  w.set_u32("qwen35.attention.head_count", 16);
  w.set_u32("qwen35.attention.head_count_kv", 4);
  w.set_u32("qwen35.attention.key_length", 256);
  w.set_u32("qwen35.attention.value_length", 256);
  w.set_f32("qwen35.attention.layer_norm_rms_epsilon", 1e-6f);
  w.set_u32("qwen35.ssm.conv_kernel", 4);
  if (!is_broken) w.set_u32("qwen35.ssm.state_size", 128);
  w.set_u32("qwen35.ssm.group_count", 16);
  w.set_u32("qwen35.ssm.time_step_rank", 32);
  w.set_u32("qwen35.ssm.inner_size", 4096);
  w.set_u32("qwen35.full_attention_interval", 4);
  if (!recurrent.empty()) {
    Array flags{ValueType::Bool, {}};
    for (const bool r : recurrent) flags.items.push_back(Value::boolean(r));
    w.set("qwen35.attention.recurrent_layers", Value::array(std::move(flags)));
  }
  std::vector<uint8_t> f32(4 * 64);
  (void)w.add_tensor("blk.0.attn_norm.weight", {64}, GgmlType::F32, f32);
  return std::move(GgufFile::from_bytes(w.write_bytes().value()).value());
}

}  // namespace

class TestModelInfo : public QObject {
  Q_OBJECT

 private slots:
  void hyperParameters() {
    auto f = llama3_8b_header(true);
    auto m = summarize_model(*f);
    QVERIFY(m.is_ok());
    QCOMPARE(m->architecture, std::string("llama"));
    QCOMPARE(m->name, std::string("Llama-3-8B shape"));
    QCOMPARE(m->file_type, std::string("Q4_K_M"));
    QCOMPARE(m->hparams.head_count_kv, int64_t(8));
    QCOMPARE(m->hparams.key_length, int64_t(128));
    QCOMPARE(m->hparams.vocab_size, int64_t(128256));
    QCOMPARE(m->hparams.rope_freq_base, 500000.0);
    QCOMPARE(m->num_params, uint64_t(512 + 64));
    QCOMPARE(m->tensor_bytes, uint64_t(288 + 128));
    QCOMPARE(m->totals_by_type.at("Q4_K").num_tensors, int64_t(1));
    QVERIFY(!m->is_vocab_only);
  }

  void dominantTypeWithoutFileType() {
    auto m = summarize_model(*llama3_8b_header(false));
    QCOMPARE(m->file_type, std::string("Q4_K"));  // most bytes are Q4_K
  }

  // llama.cpp's llama_model_desc, which llama-bench writes as model_type.
  void llamaModelDescription() {
    auto m = summarize_model(*llama3_8b_header(true));
    QVERIFY(m.is_ok());
    QCOMPARE(m->file_type_id, int64_t(15));
    QCOMPARE(llama_model_description(*m), std::string("llama 8B Q4_K - Medium"));
    m->hparams.vocab_size = 32000;  // Llama 2's vocabulary: the 7B class at 32 layers
    QCOMPARE(llama_size_label(*m), std::string("7B"));
    m->hparams.block_count = 33;  // no class in llama.cpp
    QCOMPARE(llama_size_label(*m), std::string("?B"));

    // Without general.file_type llama.cpp guesses from the type most tensors have: one Q4_K and
    // one F16 tensor here, and a second F16 one tips it.
    auto guessed = summarize_model(*llama3_8b_header(false));
    QCOMPARE(guessed->file_type_id, int64_t(-1));
    guessed->totals_by_type["F16"].num_tensors = 2;
    QCOMPARE(llama_file_type_description(*guessed), std::string("(guessed) F16"));
    guessed->totals_by_type["F16"].num_tensors = 0;
    QCOMPARE(llama_file_type_description(*guessed), std::string("(guessed) Q4_K - Medium"));
    guessed->file_type_id = 99;
    QCOMPARE(llama_file_type_description(*guessed), std::string("unknown, may not work"));

    ModelSummary qwen;  // the default model's shape
    qwen.architecture = "qwen2";
    qwen.hparams.block_count = 28;
    qwen.hparams.embedding_length = 1536;
    qwen.file_type_id = 15;
    QCOMPARE(llama_model_description(qwen), std::string("qwen2 1.5B Q4_K - Medium"));
    qwen.hparams.embedding_length = 3584;
    QCOMPARE(llama_size_label(qwen), std::string("7B"));
    ModelSummary gemma;
    gemma.architecture = "gemma3";
    gemma.hparams.block_count = 18;
    gemma.file_type_id = 0;
    QCOMPARE(llama_model_description(gemma), std::string("gemma3 270M all F32"));
    ModelSummary moe;
    moe.architecture = "qwen3moe";
    moe.hparams.block_count = 48;
    moe.file_type_id = 7;
    QCOMPARE(llama_model_description(moe), std::string("qwen3moe 30B.A3B Q8_0"));
  }

  void kvCacheIsGqaAware() {
    auto m = summarize_model(*llama3_8b_header(true));
    // Llama-3-8B at 8192 tokens in f16: 32 layers x 8 KV heads x (128+128) x 2 bytes x 8192 = 1 GiB.
    const MemoryEstimate e = estimate_memory(*m, 8192);
    QCOMPARE(e.kv_cache_bytes, uint64_t(1) << 30);
    QCOMPARE(e.weight_bytes, m->tensor_bytes);
    QVERIFY(e.scratch_bytes > 0);
    // Linear in the context.
    QCOMPARE(estimate_memory(*m, 4096).kv_cache_bytes, uint64_t(1) << 29);
  }

  // Qwen3.5-9B: the 8 attention layers alone keep keys and values (4 KV heads x (256 + 256) f16
  // values: 32 KiB per position), and each sequence holds 24 recurrent layers' state: the
  // convolution's last 3 inputs of 2 x 16 x 128 + 32 x 128 channels and 32 heads' 128 x 128, in
  // f32: 24 x (3 x 8192 + 32 x 16384) x 4 bytes.
  void recurrentLayersKeepNoKvCache() {
    auto m = summarize_model(*qwen35_9b_header());
    QVERIFY(m.is_ok());
    const ModelHyperParams& h = m->hparams;
    QCOMPARE(h.num_recurrent_layers(), int64_t(24));
    QCOMPARE(h.num_attention_layers(), int64_t(8));
    QCOMPARE(h.attention_layer_interval(), int64_t(4));
    QVERIFY(h.layer_kv[0].is_recurrent && h.layer_kv[0].head_count_kv == 0);
    QVERIFY(!h.layer_kv[3].is_recurrent && h.layer_kv[3].head_count_kv == 4);
    QCOMPARE(h.linear_num_key_heads, int64_t(16));
    QCOMPARE(h.linear_num_value_heads, int64_t(32));
    QCOMPARE(h.linear_head_dim, int64_t(128));
    QCOMPARE(h.linear_conv_kernel, int64_t(4));
    QCOMPARE(h.kv_values_per_position(), int64_t(8 * 4 * 512));
    const uint64_t state = uint64_t{24} * (3 * 8192 + 32 * 128 * 128) * 4;
    QCOMPARE(h.recurrent_state_bytes_per_sequence, state);
    const MemoryEstimate e = estimate_memory(*m, 4096);
    QCOMPARE(e.kv_cache_bytes, uint64_t(128) << 20);  // 32 KiB x 4096
    QCOMPARE(e.recurrent_state_bytes, state);         // one sequence's, whatever the context
    QCOMPARE(e.total(), e.weight_bytes + e.kv_cache_bytes + e.scratch_bytes + state);

    // Layers flagged one by one: no interval to name when the attention layers are irregular.
    std::vector<bool> flags(32, true);
    flags[0] = flags[9] = false;
    auto irregular = summarize_model(*qwen35_9b_header(flags));
    QCOMPARE(irregular->hparams.num_attention_layers(), int64_t(2));
    QCOMPARE(irregular->hparams.attention_layer_interval(), int64_t(0));
    QVERIFY(!irregular->hparams.layer_kv[9].is_recurrent);
    // Keys the loader refuses leave the summary without recurrent layers (loading says why).
    auto broken = summarize_model(*qwen35_9b_header({}, true));
    QVERIFY(broken.is_ok());
    QCOMPARE(broken->hparams.num_recurrent_layers(), int64_t(0));
    QCOMPARE(broken->hparams.recurrent_state_bytes_per_sequence, uint64_t(0));
  }

  // The summary's figures are the engine's own: the KV pool's bytes per position as the pool
  // estimate and the loaded engine have them, and one sequence's recurrent state.
  void recurrentFiguresMatchTheLoadedEngine() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    synth::SynthOptions options;
    options.shape = *synth::find_synth_preset("test-qwen35");
    options.weight_type = "F32";
    options.num_threads = 1;
    options.output_path = dir.filePath("q.gguf").toStdString();
    auto written = synth::synthesize_model(options);
    QVERIFY2(written.is_ok(), written.error_message().c_str());
    auto file = GgufFile::open(options.output_path);
    QVERIFY(file.is_ok());
    auto m = summarize_model(**file);
    QVERIFY(m.is_ok());
    QCOMPARE(m->hparams.num_recurrent_layers(), int64_t(6));
    QCOMPARE(m->hparams.attention_layer_interval(), int64_t(4));
    EngineOptions engine_options;
    engine_options.num_threads = 1;
    auto engine = Engine::load(options.output_path, engine_options);
    QVERIFY2(engine.is_ok(), engine.error_message().c_str());
    const MemoryReport report = (*engine)->memory_report();
    auto pool = estimate_kv_pool(*m, engine_options, 0);
    QVERIFY(pool.is_ok());
    QCOMPARE(pool->bytes_per_position, report.kv_bytes_per_position);
    QCOMPARE(uint64_t(2 * m->hparams.kv_values_per_position()), report.kv_bytes_per_position);  // f16
    QCOMPARE(pool->bytes, report.kv_pool_bytes);
    QCOMPARE(m->hparams.recurrent_state_bytes_per_sequence, report.recurrent_state_bytes_per_sequence);
    QVERIFY(report.recurrent_state_bytes_per_sequence > 0);
  }

  // The CUDA backend's scratch against what an H100 run measured (2026-11-27, llama-3.2-1b Q4_0,
  // 128-token steps: 589.1 MiB of scratch besides the 32 MiB cuBLAS workspace; the attention
  // workspace and step metadata, a few MiB, are not in the estimate).
  void cudaScratchMatchesTheMeasured() {
    ModelHyperParams h;
    h.embedding_length = 2048;
    h.feed_forward_length = 8192;
    h.head_count = 32;
    h.head_count_kv = 8;
    h.key_length = 64;
    h.value_length = 64;
    h.vocab_size = 128256;
    const double measured = 589.1 * (1 << 20) + static_cast<double>(kCudaCublasWorkspaceBytes);
    const auto estimate = static_cast<double>(estimate_cuda_scratch_bytes(h, 128));
    QVERIFY2(
        std::fabs(estimate - measured) < 0.03 * measured,
        qPrintable(
            QStringLiteral("estimate %1 MiB, measured %2 MiB").arg(estimate / (1 << 20)).arg(measured / (1 << 20))));
    // Up to 8 tokens a step there is no cuBLAS path: no f16 copy of the 0.5 GB output head.
    QVERIFY(estimate_cuda_scratch_bytes(h, 8) < uint64_t{64} << 20);
    QVERIFY(estimate_cuda_scratch_bytes(h, 8) > 0);
    // Experts (Qwen3-30B-A3B's 128 of 768, 8 a token): the router's logits, each routed row's
    // gate, up and output, the routing's choices and weights, the grouping's copies of the rows,
    // places and table (a group of 8 rows or one per expert), as the backend allocates them.
    ModelHyperParams moe = h;
    moe.expert_count = 128;
    moe.expert_used_count = 8;
    moe.expert_feed_forward_length = 768;
    const uint64_t routed = 128 * 8, groups = routed / 8 + 128;
    const uint64_t expert_bytes =
        (128 * 128 + routed * (768 * 2 + 2048) + routed * 2 + routed * 2048 + routed * 2 + 3 * groups + 1) * 4;
    const uint64_t growth = estimate_cuda_scratch_bytes(moe, 128) - estimate_cuda_scratch_bytes(h, 128);
    QVERIFY2(growth >= expert_bytes && growth < expert_bytes + 13 * 256,
             qPrintable(QStringLiteral("the experts' scratch %1 bytes, expected %2").arg(growth).arg(expert_bytes)));
  }

  void formatting() {
    QCOMPARE(file_type_name(0), std::string("F32"));
    QCOMPARE(file_type_name(7), std::string("Q8_0"));
    QCOMPARE(file_type_name(32), std::string("BF16"));
    QCOMPARE(file_type_name(999), std::string());
    QCOMPARE(format_count(230976), std::string("231.0 K"));
    QCOMPARE(format_count(1100048384), std::string("1.10 B"));
    QCOMPARE(format_count(494032768), std::string("494.0 M"));
    QCOMPARE(format_bytes(512), std::string("512 B"));
    QCOMPARE(format_bytes(3ull << 30), std::string("3.00 GiB"));
  }
};

QTEST_GUILESS_MAIN(TestModelInfo)
#include "test_model_info.moc"
