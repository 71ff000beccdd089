// Condensing kernel records for display: totals per (op kind, phase) or per (call name,
// phase), a running aggregate over many steps, and a decimator that turns a stream of
// per-step batches into at most a few snapshots a second, so the GUI stays smooth however
// fast the engine steps.
#pragma once

#include "iwb/engine/profile/kernel_record.h"

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <vector>

namespace iwb {

enum class AggregateBy {
  Kind,  // one entry per (op kind, phase): the roofline's points
  Name,  // one entry per (call name, phase): "attn_q", "ffn_down", ... (a finer roofline, tables)
};

struct OpAggregate {
  OpKind kind = OpKind::Matmul;
  Phase phase = Phase::Decode;
  std::string name;        // the call name with AggregateBy::Name; op_kind_name(kind) otherwise
  int64_t count = 0;       // kernel calls
  double flops = 0;
  double bytes = 0;
  double seconds = 0;

  double flops_per_s() const { return seconds > 0 ? flops / seconds : 0; }  // achieved
  double bytes_per_s() const { return seconds > 0 ? bytes / seconds : 0; }
  double intensity() const { return bytes > 0 ? flops / bytes : 0; }        // FLOP/byte
};

// Totals of `records`, ordered by phase (prefill first), then op kind, then name.
std::vector<OpAggregate> aggregate_records(std::span<const KernelRecord> records, AggregateBy by = AggregateBy::Kind);

// Totals over every batch added since construction or reset().
class RunningAggregate {
 public:
  explicit RunningAggregate(AggregateBy by = AggregateBy::Kind) : m_by(by) {}

  void add(const ProfileBatch& batch);
  void reset();
  std::vector<OpAggregate> snapshot() const;  // same order as aggregate_records

  int64_t num_steps() const { return m_num_steps; }     // batches with records
  double step_seconds() const { return m_step_seconds; }  // their whole steps
  double kernel_seconds() const { return m_kernel_seconds; }

 private:
  using Key = std::tuple<int, int, std::string>;  // phase, kind, name
  void accumulate(const KernelRecord& r);

  AggregateBy m_by;
  std::map<Key, OpAggregate> m_totals;
  int64_t m_num_steps = 0;
  double m_step_seconds = 0;
  double m_kernel_seconds = 0;
};

// What the GUI draws at one moment.
struct ProfileSnapshot {
  uint64_t last_step_index = 0;
  int64_t num_batches = 0;                     // batches folded in since the previous snapshot
  std::optional<ProfileBatch> last_prefill;    // the newest batch of each phase, records and all
  std::optional<ProfileBatch> last_decode;
  std::vector<OpAggregate> last_steps;         // aggregates of last_prefill and last_decode
  std::vector<OpAggregate> running;            // the running aggregate since reset()
  double running_step_seconds = 0;
  double running_kernel_seconds = 0;
  int64_t running_num_steps = 0;
};

// Folds every batch into a running aggregate and releases a snapshot at most once per
// `min_interval_seconds` of the caller's clock (a worker thread passes steady-clock seconds).
class ProfileDecimator {
 public:
  explicit ProfileDecimator(double min_interval_seconds = 0.1, AggregateBy by = AggregateBy::Kind)
      : m_min_interval(min_interval_seconds), m_by(by), m_running(by) {}

  // A snapshot when one is due, otherwise nullopt (the batch is kept in the aggregates).
  std::optional<ProfileSnapshot> add(const ProfileBatch& batch, double now_seconds);
  // A snapshot now (at the end of a request, so the last points are not held back); nullopt
  // when nothing arrived since the previous one.
  std::optional<ProfileSnapshot> flush(double now_seconds);
  void reset();  // forgets the running aggregate and the last batches

 private:
  ProfileSnapshot make_snapshot();

  double m_min_interval;
  AggregateBy m_by;
  RunningAggregate m_running;
  std::optional<ProfileBatch> m_last_prefill, m_last_decode;
  uint64_t m_last_step_index = 0;
  int64_t m_num_pending = 0;
  std::optional<double> m_last_emit;
};

}  // namespace iwb
