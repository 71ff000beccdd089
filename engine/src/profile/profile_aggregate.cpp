// Aggregation and decimation of kernel records for the GUI.
#include "iwb/engine/profile/profile_aggregate.h"

namespace iwb {
namespace {

std::string key_name(const KernelRecord& r, AggregateBy by) {
  return by == AggregateBy::Name ? std::string(r.name) : std::string(op_kind_name(r.kind));
}

}  // namespace

void RunningAggregate::accumulate(const KernelRecord& r) {
  Key key{static_cast<int>(r.phase), static_cast<int>(r.kind), key_name(r, m_by)};
  auto [it, is_new] = m_totals.try_emplace(std::move(key));
  OpAggregate& a = it->second;
  if (is_new) {
    a.kind = r.kind;
    a.phase = r.phase;
    a.name = std::get<2>(it->first);
  }
  a.count += 1;
  a.flops += r.flops;
  a.bytes += r.bytes;
  a.seconds += r.seconds;
}

void RunningAggregate::add(const ProfileBatch& batch) {
  if (batch.kernels.empty()) return;
  for (const KernelRecord& r : batch.kernels) accumulate(r);
  m_num_steps += 1;
  m_step_seconds += batch.step_seconds;
  m_kernel_seconds += batch.kernel_seconds();
}

void RunningAggregate::reset() {
  m_totals.clear();
  m_num_steps = 0;
  m_step_seconds = 0;
  m_kernel_seconds = 0;
}

std::vector<OpAggregate> RunningAggregate::snapshot() const {
  std::vector<OpAggregate> out;
  out.reserve(m_totals.size());
  for (const auto& [key, value] : m_totals) out.push_back(value);
  return out;
}

std::vector<OpAggregate> aggregate_records(std::span<const KernelRecord> records, AggregateBy by) {
  RunningAggregate a(by);
  ProfileBatch batch;
  batch.kernels.assign(records.begin(), records.end());
  a.add(batch);
  return a.snapshot();
}

std::optional<ProfileSnapshot> ProfileDecimator::add(const ProfileBatch& batch, double now_seconds) {
  if (!batch.kernels.empty()) {
    m_running.add(batch);
    (batch.phase == Phase::Prefill ? m_last_prefill : m_last_decode) = batch;
    m_last_step_index = batch.step_index;
    m_num_pending += 1;
  }
  if (m_num_pending == 0) return std::nullopt;
  if (m_last_emit && now_seconds - *m_last_emit < m_min_interval) return std::nullopt;
  m_last_emit = now_seconds;
  return make_snapshot();
}

std::optional<ProfileSnapshot> ProfileDecimator::flush(double now_seconds) {
  if (m_num_pending == 0) return std::nullopt;
  m_last_emit = now_seconds;
  return make_snapshot();
}

void ProfileDecimator::reset() {
  m_running.reset();
  m_last_prefill.reset();
  m_last_decode.reset();
  m_num_pending = 0;
  m_last_emit.reset();
}

ProfileSnapshot ProfileDecimator::make_snapshot() {
  ProfileSnapshot s;
  s.last_step_index = m_last_step_index;
  s.num_batches = m_num_pending;
  s.last_prefill = m_last_prefill;
  s.last_decode = m_last_decode;
  RunningAggregate last(m_by);
  if (m_last_prefill) last.add(*m_last_prefill);
  if (m_last_decode) last.add(*m_last_decode);
  s.last_steps = last.snapshot();
  s.running = m_running.snapshot();
  s.running_step_seconds = m_running.step_seconds();
  s.running_kernel_seconds = m_running.kernel_seconds();
  s.running_num_steps = m_running.num_steps();
  m_num_pending = 0;
  return s;
}

}  // namespace iwb
