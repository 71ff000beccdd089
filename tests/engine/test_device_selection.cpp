// Device selection (EngineOptions::device) and the CUDA backend's host-side step planning,
// on any machine: the parse and decision rules against made-up device lists, Engine::load with
// "cpu", "auto" and "cuda:0" as this machine allows, and the step checks, fixed-width block
// tables, graph keys and logits chunks the CUDA forward pass relies on.
#include "tiny_models.h"

#include "iwb/engine/backend/cuda_step_plan.h"
#include "iwb/engine/backend/device_selection.h"
#include "iwb/engine/runtime/engine.h"
#include "iwb/engine/runtime/load_mode.h"

#include <QTemporaryDir>
#include <QTest>

#include <algorithm>

using namespace iwb;

namespace {

ComputeDeviceInfo fake_gpu(int index) {
  ComputeDeviceInfo d;
  d.kind = ComputeDeviceKind::Cuda;
  d.id = "cuda:" + std::to_string(index);
  d.name = "Test GPU " + std::to_string(index);
  return d;
}

// Two sequences: one decoding at position 20 (block table 3, 5), one prefilling 3 tokens at 0..2.
FlatBatch mixed_batch() {
  FlatBatch b;
  b.tokens = {7, 8, 9, 10};
  b.positions = {20, 0, 1, 2};
  b.slot_mapping = {5 * 16 + 4, 6 * 16, 6 * 16 + 1, 6 * 16 + 2};
  b.token_sequences = {0, 1, 1, 1};
  b.max_blocks_per_sequence = 2;
  b.block_tables = {3, 5, 6, -1};
  b.sequence_lengths = {21, 3};
  b.logits_rows = {0, 3};
  b.logits_sequences = {0, 1};
  return b;
}

CudaStepCapacity capacity() {
  CudaStepCapacity c;
  c.max_tokens = 8;
  c.max_sequences = 4;
  c.max_blocks_per_sequence = 4;
  c.num_blocks = 10;
  c.block_size = 16;
  c.vocab_size = 100;
  return c;
}

}  // namespace

class TestDeviceSelection : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_tmp;
  std::string m_model;

 private slots:
  // EngineOptions::load_mode's rule, against made-up memory and kernel settings: auto reads on
  // the CPU with huge pages offered and room to spare, and maps on a GPU, without huge pages and
  // for a file over half the memory; none is refused past the memory; unknown modes are named.
  void loadModeRule() {
    const uint64_t gib = uint64_t{1} << 30;
    const std::string madvise = "always [madvise] never\n", always = "[always] madvise never\n",
                      never = "always madvise [never]\n";
    const auto mode = [](const Result<LoadModeChoice>& c) { return c.is_ok() ? c->mode : gguf::LoadMode::Map; };
    QVERIFY(mode(choose_load_mode("auto", false, 1 * gib, 20 * gib, madvise)) == gguf::LoadMode::Read);
    QVERIFY(mode(choose_load_mode("auto", false, 1 * gib, 20 * gib, always)) == gguf::LoadMode::Read);
    auto gpu = choose_load_mode("auto", true, 1 * gib, 20 * gib, madvise);
    QVERIFY(gpu.is_ok() && gpu->mode == gguf::LoadMode::Map && gpu->reason.find("GPU") != std::string::npos);
    auto no_thp = choose_load_mode("auto", false, 1 * gib, 20 * gib, never);
    QVERIFY(no_thp.is_ok() && no_thp->mode == gguf::LoadMode::Map);
    QVERIFY(mode(choose_load_mode("auto", false, 1 * gib, 20 * gib, "")) == gguf::LoadMode::Map);  // no sysfs file
    auto big = choose_load_mode("auto", false, 11 * gib, 20 * gib, madvise);
    QVERIFY(big.is_ok() && big->mode == gguf::LoadMode::Map && big->reason.find("half") != std::string::npos);
    QVERIFY(mode(choose_load_mode("auto", false, 10 * gib, 20 * gib, madvise)) == gguf::LoadMode::Read);
    // Explicit modes win over the rule; none only where the file fits at all.
    QVERIFY(mode(choose_load_mode("mmap", false, 1 * gib, 20 * gib, madvise)) == gguf::LoadMode::Map);
    QVERIFY(mode(choose_load_mode("none", false, 15 * gib, 20 * gib, never)) == gguf::LoadMode::Read);
    auto too_big = choose_load_mode("none", false, 30 * gib, 20 * gib, madvise);
    QVERIFY(!too_big.is_ok());
    QVERIFY2(too_big.error_message().find("load mode mmap maps the file instead") != std::string::npos,
             too_big.error_message().c_str());
    // mlock maps (on the CPU too) and asks for the lock; the other modes never lock.
    auto lock = choose_load_mode("mlock", false, 1 * gib, 20 * gib, madvise);
    QVERIFY(lock.is_ok() && lock->mode == gguf::LoadMode::Map && lock->lock_in_memory);
    QVERIFY(!choose_load_mode("mmap", false, 1 * gib, 20 * gib, madvise)->lock_in_memory);
    QVERIFY(!choose_load_mode("auto", false, 1 * gib, 20 * gib, madvise)->lock_in_memory);
    auto unknown = choose_load_mode("dio", false, 1 * gib, 20 * gib, madvise);
    QVERIFY(!unknown.is_ok() && unknown.error_message().find("auto, mmap, mlock or none") != std::string::npos);
  }

  void initTestCase() {
    QVERIFY(m_tmp.isValid());
    m_model = m_tmp.filePath("tiny.gguf").toStdString();
    test::TinyModelSpec spec;
    spec.n_layer = 1;
    QVERIFY(test::write_tiny_model(spec, m_model).is_ok());
  }

  void parses_device_names() {
    QCOMPARE(parse_device_request("auto")->kind, DeviceRequestKind::Auto);
    QCOMPARE(parse_device_request("cpu")->kind, DeviceRequestKind::Cpu);
    QCOMPARE(parse_device_request("cuda")->cuda_index, 0);
    QCOMPARE(parse_device_request("cuda:3")->cuda_index, 3);
    QCOMPARE(parse_device_request("cuda:3")->kind, DeviceRequestKind::Cuda);
    for (const char* bad : {"gpu", "cuda:x", "cuda:", "cuda:-1", "cuda:+1", "cuda:1a", "CPU", " cpu", "cuda:99999"}) {
      Result<DeviceRequest> r = parse_device_request(bad);
      QVERIFY2(!r.is_ok(), bad);
      QCOMPARE(r.status().code(), ErrorCode::InvalidArgument);
      QVERIFY2(r.error_message().find("auto, cpu, cuda or cuda:N") != std::string::npos, r.error_message().c_str());
    }
  }

  void decides_against_device_lists() {
    const Result<std::vector<ComputeDeviceInfo>> none =
        make_error(ErrorCode::NotFound, "no CUDA device: no CUDA-capable device is detected");
    const Result<std::vector<ComputeDeviceInfo>> two = std::vector<ComputeDeviceInfo>{fake_gpu(0), fake_gpu(1)};

    Result<DeviceChoice> c = choose_device({DeviceRequestKind::Auto, 0}, none);
    QVERIFY(c.is_ok());
    QCOMPARE(c->kind, ComputeDeviceKind::Cpu);
    QVERIFY(c->is_automatic);
    QVERIFY(c->cpu_reason.find("no CUDA-capable device") != std::string::npos);

    c = choose_device({DeviceRequestKind::Auto, 0}, two);
    QCOMPARE(c->kind, ComputeDeviceKind::Cuda);
    QCOMPARE(c->id(), std::string("cuda:0"));
    QVERIFY(c->is_automatic);
    QVERIFY(c->cpu_reason.empty());

    c = choose_device({DeviceRequestKind::Cuda, 1}, two);
    QCOMPARE(c->id(), std::string("cuda:1"));
    QCOMPARE(c->cuda_device.name, std::string("Test GPU 1"));
    QVERIFY(!c->is_automatic);

    c = choose_device({DeviceRequestKind::Cuda, 2}, two);
    QVERIFY(!c.is_ok());
    QCOMPARE(c.status().code(), ErrorCode::NotFound);
    QVERIFY2(c.error_message().find("cuda:2 does not exist") != std::string::npos, c.error_message().c_str());

    c = choose_device({DeviceRequestKind::Cuda, 0}, none);
    QVERIFY(!c.is_ok());
    QCOMPARE(c.status().code(), ErrorCode::NotFound);
    QVERIFY2(c.error_message().find("--device cpu") != std::string::npos, c.error_message().c_str());

    c = choose_device({DeviceRequestKind::Cpu, 0}, two);
    QCOMPARE(c->kind, ComputeDeviceKind::Cpu);
    QVERIFY(c->cpu_reason.empty());
  }

  void loads_on_the_cpu_when_asked() {
    EngineOptions o;
    o.device = "cpu";
    o.num_threads = 1;
    Result<std::unique_ptr<Engine>> e = Engine::load(m_model, o);
    QVERIFY2(e.is_ok(), e.error_message().c_str());
    QCOMPARE((*e)->model().device, std::string("cpu"));
    QVERIFY((*e)->model().device_fallback_reason.empty());
    QVERIFY((*e)->model().device_description.find("cpu") == 0);
    QCOMPARE((*e)->memory_report().device_id, std::string("cpu"));
    QCOMPARE((*e)->memory_report().device_kv_pool_bytes, uint64_t{0});
    Result<std::vector<float>> logits = (*e)->logits_for({1, 5, 9});
    QVERIFY(logits.is_ok());
  }

  void auto_falls_back_to_the_cpu_without_a_gpu() {
    const bool has_gpu = list_cuda_devices().is_ok();
    EngineOptions o;
    o.device = "auto";
    o.num_threads = 1;
    std::vector<std::string> stages;
    Result<std::unique_ptr<Engine>> e =
        Engine::load(m_model, o, [&](double, const std::string& stage) { stages.push_back(stage); });
    QVERIFY2(e.is_ok(), e.error_message().c_str());
    if (has_gpu) {
      QCOMPARE((*e)->model().device, std::string("cuda:0"));
      return;
    }
    QCOMPARE((*e)->model().device, std::string("cpu"));
    QVERIFY(!(*e)->model().device_fallback_reason.empty());
    QVERIFY(std::any_of(stages.begin(), stages.end(),
                        [](const std::string& s) { return s.find("running on the CPU") != std::string::npos; }));
  }

  void a_missing_gpu_is_a_clear_error() {
    if (list_cuda_devices().is_ok()) QSKIP("this machine has a CUDA device: cuda:0 exists");
    EngineOptions o;
    o.device = "cuda:0";
    Result<std::unique_ptr<Engine>> e = Engine::load(m_model, o);
    QVERIFY(!e.is_ok());
    QVERIFY(e.status().code() == ErrorCode::NotFound || e.status().code() == ErrorCode::Unsupported ||
            e.status().code() == ErrorCode::DeviceError);
    QVERIFY2(e.error_message().find("cuda:0") != std::string::npos, e.error_message().c_str());
  }

  void a_bad_device_name_is_refused() {
    for (const char* bad : {"gpu", "cuda:x"}) {
      EngineOptions o;
      o.device = bad;
      Result<std::unique_ptr<Engine>> e = Engine::load(m_model, o);
      QVERIFY(!e.is_ok());
      QCOMPARE(e.status().code(), ErrorCode::InvalidArgument);
      QVERIFY2(e.error_message().find(std::string("'") + bad + "'") != std::string::npos, e.error_message().c_str());
    }
  }

  void checks_steps_against_the_capacity() {
    QVERIFY(check_cuda_step(mixed_batch(), capacity()).is_ok());
    auto refused = [](FlatBatch b, CudaStepCapacity c, const char* expected) {
      const Status s = check_cuda_step(b, c);
      if (s.is_ok()) return std::string("accepted");
      return s.message().find(expected) != std::string::npos ? std::string() : s.message();
    };
    FlatBatch b = mixed_batch();
    CudaStepCapacity c = capacity();
    c.max_tokens = 3;
    QCOMPARE(refused(b, c, "4 tokens"), std::string());
    c = capacity();
    c.max_sequences = 1;
    QCOMPARE(refused(b, c, "2 sequences"), std::string());
    b.tokens[2] = 100;
    QCOMPARE(refused(b, capacity(), "outside the vocabulary"), std::string());
    b = mixed_batch();
    b.block_tables[1] = 10;
    QCOMPARE(refused(b, capacity(), "outside the pool"), std::string());
    b = mixed_batch();
    b.slot_mapping[0] = 160;
    QCOMPARE(refused(b, capacity(), "KV slot 160"), std::string());
    b = mixed_batch();
    b.positions[3] = 3;
    QCOMPARE(refused(b, capacity(), "past its sequence"), std::string());
    b = mixed_batch();
    b.logits_rows[1] = 4;
    QCOMPARE(refused(b, capacity(), "logits of a row"), std::string());
    b = mixed_batch();
    b.token_sequences = {0, 1, 0, 1};
    QCOMPARE(refused(b, capacity(), "interleaves"), std::string());
    c = capacity();
    c.max_blocks_per_sequence = 1;
    QCOMPARE(refused(mixed_batch(), c, "block tables of 2"), std::string());
    b = mixed_batch();
    b.positions.pop_back();
    QCOMPARE(refused(b, capacity(), "differ in length"), std::string());
  }

  void packs_block_tables_at_a_fixed_width() {
    std::vector<int32_t> out(2 * 4, 77);
    pack_block_tables(mixed_batch(), 4, out);
    QCOMPARE(out, (std::vector<int32_t>{3, 5, 0, 0, 6, 0, 0, 0}));
  }

  void keys_decode_graphs() {
    QVERIFY(!decode_graph_key(mixed_batch(), 128).has_value());  // a prefill chunk runs eagerly
    FlatBatch d;
    d.tokens = {4, 5, 6};
    d.positions = {9, 30, 2};
    d.slot_mapping = {9, 46, 50};
    d.token_sequences = {0, 1, 2};
    d.max_blocks_per_sequence = 2;
    d.block_tables = {0, -1, 1, 2, 3, -1};
    d.sequence_lengths = {10, 31, 3};
    d.logits_rows = {0, 1, 2};
    d.logits_sequences = {0, 1, 2};
    const std::optional<DecodeGraphKey> key = decode_graph_key(d, 128);
    QVERIFY(key.has_value());
    QCOMPARE(key->num_tokens, int64_t{3});
    QCOMPARE(key->num_sequences, int64_t{3});
    QVERIFY(!decode_graph_key(d, 2).has_value());  // more rows than the logits buffer
    FlatBatch partial = d;
    partial.logits_rows = {0, 2};
    partial.logits_sequences = {0, 2};
    QVERIFY(!decode_graph_key(partial, 128).has_value());
    // Speculative verification: two tokens of one sequence.
    FlatBatch verify = d;
    verify.token_sequences = {0, 0, 1};
    verify.sequence_lengths = {11, 31};
    verify.block_tables = {0, -1, 1, 2};
    QVERIFY(!decode_graph_key(verify, 128).has_value());
  }

  void chunks_logits_rows() {
    QVERIFY(logits_row_chunks(0, 8).empty());
    const std::vector<RowChunk> chunks = logits_row_chunks(19, 8);
    QCOMPARE(chunks.size(), size_t{3});
    QCOMPARE(chunks[2].first, int64_t{16});
    QCOMPARE(chunks[2].count, int64_t{3});
  }

  // Programmatic dependent launch: Hopper and later only (the griddepcontrol instructions), and
  // IWB_CUDA_PDL=0 turns it off for side-by-side runs; other values leave it on.
  void launches_programmatically_on_hopper_unless_told_not_to() {
    QVERIFY(cuda_may_launch_programmatically(9, nullptr));
    QVERIFY(cuda_may_launch_programmatically(10, nullptr));
    QVERIFY(cuda_may_launch_programmatically(9, "1"));
    QVERIFY(!cuda_may_launch_programmatically(9, "0"));
    QVERIFY(!cuda_may_launch_programmatically(8, nullptr));
    QVERIFY(!cuda_may_launch_programmatically(8, "1"));
  }
};

QTEST_GUILESS_MAIN(TestDeviceSelection)
#include "test_device_selection.moc"
