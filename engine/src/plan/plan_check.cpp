// check_forward_plan: the plan's data flow and widths, so a new architecture's plan that reads
// an unwritten buffer, feeds a matmul the wrong width or sums experts it did not route fails at
// load with the op's name.
#include "iwb/engine/plan/forward_plan.h"

#include <algorithm>
#include <array>
#include <set>
#include <string>

namespace iwb {
namespace {

constexpr size_t kNumBuffers = static_cast<size_t>(PlanBuffer::LinearOut) + 1;

// The buffer's width in layer il (Gemma 4's layers differ in their attention widths; -1: the
// globals').
int64_t width_of(const ModelConfig& c, int64_t il, PlanBuffer b) {
  switch (b) {
    case PlanBuffer::X:
    case PlanBuffer::Xn:
    case PlanBuffer::Proj:
    case PlanBuffer::Final: return c.embedding_length;
    case PlanBuffer::Q: return il >= 0 ? c.layer_q_width(il) : c.q_width();
    case PlanBuffer::K: return il >= 0 ? c.layer_k_width(il) : c.k_width();
    case PlanBuffer::V: return il >= 0 ? c.layer_v_width(il) : c.v_width();
    case PlanBuffer::Attn: return il >= 0 ? c.layer_attention_output_width(il) : c.attention_output_width();
    case PlanBuffer::Gate:
    case PlanBuffer::Up: return il >= 0 ? c.layer_feed_forward_length(il) : c.feed_forward_length;
    case PlanBuffer::Logits: return c.vocab_size;
    case PlanBuffer::RouterLogits: return c.num_experts;
    case PlanBuffer::ExpertIn:
    case PlanBuffer::ExpertOut: return c.embedding_length;
    case PlanBuffer::ExpertGate:
    case PlanBuffer::ExpertUp: return c.expert_feed_forward_length;
    case PlanBuffer::SharedGate:
    case PlanBuffer::SharedUp: return c.shared_expert_width();
    case PlanBuffer::QLatent: return c.q_lora_rank;
    case PlanBuffer::KvLatent: return c.has_latent_attention() ? c.latent_kv_width() : 0;
    case PlanBuffer::QHeads: return c.q_heads_width();
    case PlanBuffer::AttnHeads: return c.attention_heads_width();
    case PlanBuffer::Hidden:
    case PlanBuffer::HiddenIn: return c.embedding_length;
    case PlanBuffer::Joined: return 2 * c.embedding_length;
    case PlanBuffer::MoeOut: return c.embedding_length;
    case PlanBuffer::PleProj:
    case PlanBuffer::PleIn: return c.per_layer_inputs_width();
    case PlanBuffer::PleGate: return c.per_layer_embedding_length;
    case PlanBuffer::QGate: return 2 * (il >= 0 ? c.layer_q_width(il) : c.q_width());
    case PlanBuffer::AttnGate: return il >= 0 ? c.layer_attention_output_width(il) : c.attention_output_width();
    case PlanBuffer::LinearMixed:
    case PlanBuffer::LinearConv: return c.linear_conv_channels();
    case PlanBuffer::LinearGate:
    case PlanBuffer::LinearOut: return c.linear_value_width();
    case PlanBuffer::LinearBeta:
    case PlanBuffer::LinearAlpha: return c.linear_num_value_heads;
  }
  return 0;
}

class FlowCheck {
 public:
  explicit FlowCheck(const ModelConfig& c) : m_c(c) {}

  Status op(const PlanOp& op) {
    switch (op.kind) {
      case PlanOpKind::Embedding: IWB_RETURN_IF_ERROR(token_rows_only(op)); return write(op, PlanBuffer::X);
      case PlanOpKind::RmsNorm:
        IWB_RETURN_IF_ERROR(read(op, op.input));
        if (op.width * op.rows_per_token != width_of(m_c, op.layer, op.input) ||
            width_of(m_c, op.layer, op.input) != width_of(m_c, op.layer, op.output)) {
          return fail(op, "normalises rows of " + std::to_string(op.width) + " x " + std::to_string(op.rows_per_token) +
                              " values of a buffer " + std::to_string(width_of(m_c, op.layer, op.input)) + " wide");
        }
        return write(op, op.output);
      case PlanOpKind::Matmuls:
      case PlanOpKind::ExpertMatmuls:
        IWB_RETURN_IF_ERROR(read(op, op.input));
        // Expert products read and write the grouped expert rows only; dense ones never do.
        if ((op.kind == PlanOpKind::ExpertMatmuls) != is_expert_rows(op.input)) {
          return fail(op, "mixes the expert rows with the tokens' rows");
        }
        if (op.kind == PlanOpKind::ExpertMatmuls && m_routing_layer != op.layer) {
          return fail(op, "runs experts its layer did not route to");
        }
        if (op.num_products < 1 || op.num_products > static_cast<int32_t>(op.products.size())) {
          return fail(op, "has " + std::to_string(op.num_products) + " products");
        }
        for (const PlanProduct& p : op.matmuls()) {
          if (p.in_features != width_of(m_c, op.layer, op.input) ||
              p.out_features != width_of(m_c, op.layer, p.output)) {
            return fail(op, std::string(p.name) + " maps " + std::to_string(p.in_features) + " -> " +
                                std::to_string(p.out_features) + " between buffers of " +
                                std::to_string(width_of(m_c, op.layer, op.input)) + " and " +
                                std::to_string(width_of(m_c, op.layer, p.output)));
          }
          if (is_expert_rows(p.output) != is_expert_rows(op.input)) {
            return fail(op, std::string(p.name) + " mixes the expert rows with the tokens' rows");
          }
          IWB_RETURN_IF_ERROR(write(op, p.output));
        }
        return {};
      case PlanOpKind::Rope:
        IWB_RETURN_IF_ERROR(token_rows_only(op));
        IWB_RETURN_IF_ERROR(read(op, PlanBuffer::Q));
        return op.is_query_only ? Status{} : read(op, PlanBuffer::K);
      case PlanOpKind::KvWrite:
        IWB_RETURN_IF_ERROR(token_rows_only(op));
        IWB_RETURN_IF_ERROR(read(op, PlanBuffer::K));
        IWB_RETURN_IF_ERROR(read(op, PlanBuffer::V));
        if (op.layer >= 0) m_kv_written.insert(op.layer);
        return {};
      case PlanOpKind::Attention:
        IWB_RETURN_IF_ERROR(token_rows_only(op));
        IWB_RETURN_IF_ERROR(read(op, PlanBuffer::Q));
        // Its own layer's keys and values, or (a shared KV layer) an earlier layer's.
        if (m_kv_written.count(op.cache_layer()) == 0 || op.cache_layer() > op.layer) {
          return fail(op, "reads the cache of layer " + std::to_string(op.cache_layer()) +
                              " before that layer wrote its keys and values");
        }
        if (op.cache_layer() != op.layer && (m_c.layer_k_width(op.cache_layer()) != m_c.layer_k_width(op.layer) ||
                                             m_c.is_sliding(op.cache_layer()) != m_c.is_sliding(op.layer))) {
          return fail(op, "reads the cache of a layer of another kind or head shape");
        }
        return write(op, PlanBuffer::Attn);
      case PlanOpKind::PerLayerInputs:
        IWB_RETURN_IF_ERROR(token_rows_only(op));
        IWB_RETURN_IF_ERROR(read(op, op.input));
        if (op.width * op.rows_per_token != width_of(m_c, op.layer, op.input) ||
            width_of(m_c, op.layer, op.input) != width_of(m_c, op.layer, op.output)) {
          return fail(op, "lays out per-layer inputs of another width");
        }
        return write(op, op.output);
      case PlanOpKind::GatedActivation:
        IWB_RETURN_IF_ERROR(read(op, op.input));
        IWB_RETURN_IF_ERROR(read(op, op.multiplier));
        // A layer's slice of the per-layer inputs is one layer's share of the buffer's width.
        if (op.width != width_of(m_c, op.layer, op.input) ||
            op.width != width_of(m_c, op.layer, op.multiplier) /
                            (op.is_multiplier_layer_slice ? std::max<int64_t>(m_c.num_layers, 1) : 1) ||
            op.width != width_of(m_c, op.layer, op.output) ||
            op.rows_per_token != (is_expert_rows(op.input) ? m_c.num_experts_used : 1)) {
          return fail(op, "multiplies rows of " + std::to_string(op.width) + " x " + std::to_string(op.rows_per_token) +
                              " per token of buffers " + std::to_string(width_of(m_c, op.layer, op.input)) + " and " +
                              std::to_string(width_of(m_c, op.layer, op.multiplier)) + " wide");
        }
        return write(op, op.output);
      case PlanOpKind::ResidualAdd:
        if (width_of(m_c, op.layer, op.input) != m_c.embedding_length ||
            width_of(m_c, op.layer, op.output) != m_c.embedding_length) {
          return fail(op, "adds a buffer that is not the residual stream's width");
        }
        IWB_RETURN_IF_ERROR(read(op, op.output));
        IWB_RETURN_IF_ERROR(read(op, op.input));
        return write(op, op.output);
      case PlanOpKind::GatherRows:
        if (!m_is_sampling_rows) return fail(op, "gathers the rows that sample outside the logits section");
        if (width_of(m_c, op.layer, op.input) != width_of(m_c, op.layer, op.output))
          return fail(op, "gathers rows into a buffer of another width");
        if (m_written[static_cast<size_t>(op.input)] != Rows::Tokens) {
          return fail(op, "gathers from a buffer the body did not write");
        }
        return write(op, op.output);
      case PlanOpKind::Softcap: return read(op, PlanBuffer::Logits);
      case PlanOpKind::ExpertRouting:
        if (!m_c.has_experts()) return fail(op, "routes to experts in a model without any");
        IWB_RETURN_IF_ERROR(read(op, PlanBuffer::RouterLogits));
        IWB_RETURN_IF_ERROR(read(op, PlanBuffer::Xn));
        m_routing_layer = op.layer;
        return write(op, PlanBuffer::ExpertIn);
      case PlanOpKind::LatentKv:
        if (!m_c.has_latent_attention()) return fail(op, "reads a key/value latent in a model without one");
        IWB_RETURN_IF_ERROR(token_rows_only(op));
        IWB_RETURN_IF_ERROR(read(op, PlanBuffer::KvLatent));
        if (op.width != m_c.kv_lora_rank || m_c.k_width() != m_c.latent_kv_width() ||
            m_c.v_width() != m_c.kv_lora_rank) {
          return fail(op, "splits a latent of " + std::to_string(op.width) + " into keys of " +
                              std::to_string(m_c.k_width()) + " and values of " + std::to_string(m_c.v_width()));
        }
        IWB_RETURN_IF_ERROR(write(op, PlanBuffer::K));
        return write(op, PlanBuffer::V);
      case PlanOpKind::HeadMatmuls: {
        IWB_RETURN_IF_ERROR(token_rows_only(op));
        IWB_RETURN_IF_ERROR(read(op, op.input));
        const PlanProduct& p = op.products[0];
        const int64_t heads = op.rows_per_token;
        const int64_t in_head = heads > 0 ? width_of(m_c, op.layer, op.input) / heads : 0;
        const int64_t out_head = heads > 0 ? width_of(m_c, op.layer, p.output) / heads : 0;
        // Each head's product, and the rest of its input row copied behind it.
        if (op.num_products != 1 || heads != m_c.num_heads || in_head * heads != width_of(m_c, op.layer, op.input) ||
            out_head * heads != width_of(m_c, op.layer, p.output) || p.in_features > in_head ||
            out_head - p.out_features != in_head - p.in_features) {
          return fail(op, std::string(p.name) + " maps " + std::to_string(p.in_features) + " -> " +
                              std::to_string(p.out_features) + " per head between heads of " + std::to_string(in_head) +
                              " and " + std::to_string(out_head));
        }
        return write(op, p.output);
      }
      case PlanOpKind::Concat:
        IWB_RETURN_IF_ERROR(read(op, op.input));
        IWB_RETURN_IF_ERROR(read(op, op.appended));
        if (width_of(m_c, op.layer, op.input) + width_of(m_c, op.layer, op.appended) !=
            width_of(m_c, op.layer, op.output)) {
          return fail(op, "joins rows of " + std::to_string(width_of(m_c, op.layer, op.input)) + " and " +
                              std::to_string(width_of(m_c, op.layer, op.appended)) + " into rows of " +
                              std::to_string(width_of(m_c, op.layer, op.output)));
        }
        return write(op, op.output);
      case PlanOpKind::ExpertCombine:
        IWB_RETURN_IF_ERROR(read(op, PlanBuffer::ExpertOut));
        if (m_routing_layer != op.layer) return fail(op, "sums expert outputs its layer did not route");
        if (width_of(m_c, op.layer, op.output) != m_c.embedding_length) {
          return fail(op, "sums expert outputs into a buffer that is not the residual stream's width");
        }
        if (op.is_accumulating) IWB_RETURN_IF_ERROR(read(op, op.output));
        return write(op, op.output);
      case PlanOpKind::SplitQueryGate:
        IWB_RETURN_IF_ERROR(token_rows_only(op));
        IWB_RETURN_IF_ERROR(read(op, op.input));
        if (op.width * op.rows_per_token != width_of(m_c, op.layer, op.output) ||
            2 * width_of(m_c, op.layer, op.output) != width_of(m_c, op.layer, op.input) ||
            width_of(m_c, op.layer, op.appended) != width_of(m_c, op.layer, op.output)) {
          return fail(op, "splits rows of " + std::to_string(width_of(m_c, op.layer, op.input)) + " into halves of " +
                              std::to_string(op.width) + " x " + std::to_string(op.rows_per_token));
        }
        IWB_RETURN_IF_ERROR(write(op, op.output));
        return write(op, op.appended);
      case PlanOpKind::OutputGate:
        IWB_RETURN_IF_ERROR(read(op, op.input));
        IWB_RETURN_IF_ERROR(read(op, op.output));
        if (op.width != width_of(m_c, op.layer, op.input) || op.width != width_of(m_c, op.layer, op.output)) {
          return fail(op, "gates rows of " + std::to_string(op.width) + " with gates of " +
                              std::to_string(width_of(m_c, op.layer, op.input)));
        }
        return write(op, op.output);
      // The recurrence runs over every token of a sequence in order, carrying its state.
      case PlanOpKind::ShortConv:
      case PlanOpKind::DeltaNet:
        if (!m_c.is_recurrent(op.layer)) return fail(op, "runs a recurrence in a layer that is not recurrent");
        IWB_RETURN_IF_ERROR(token_rows_only(op));
        IWB_RETURN_IF_ERROR(read(op, op.input));
        if (op.kind == PlanOpKind::DeltaNet) {
          IWB_RETURN_IF_ERROR(read(op, PlanBuffer::LinearAlpha));
          IWB_RETURN_IF_ERROR(read(op, PlanBuffer::LinearBeta));
        }
        if (width_of(m_c, op.layer, op.input) != m_c.linear_conv_channels() ||
            op.width != width_of(m_c, op.layer, op.output)) {
          return fail(op, "reads or writes rows of another width than the layer's recurrence");
        }
        return write(op, op.output);
      case PlanOpKind::SharedExpertGate:
        if (!m_c.has_shared_expert_gate) return fail(op, "gates a shared expert in a model without the gate");
        IWB_RETURN_IF_ERROR(read(op, op.input));
        IWB_RETURN_IF_ERROR(read(op, op.output));
        if (width_of(m_c, op.layer, op.input) != m_c.embedding_length ||
            width_of(m_c, op.layer, op.output) != m_c.embedding_length) {
          return fail(op, "gates rows that are not the residual stream's width");
        }
        return write(op, op.output);
      case PlanOpKind::LayerScale:
        if (width_of(m_c, op.layer, op.output) != m_c.embedding_length) {
          return fail(op, "scales a buffer that is not the residual stream");
        }
        IWB_RETURN_IF_ERROR(read(op, op.output));
        return write(op, op.output);
    }
    return fail(op, "is of an unknown kind");
  }

  // From here on the ops run over the rows that sample: what the body wrote holds other rows.
  void enter_sampling_rows() { m_is_sampling_rows = true; }
  // The caller's rows, there before the first op (an MTP head's HiddenIn).
  void provide(PlanBuffer b) { m_written[static_cast<size_t>(b)] = Rows::Tokens; }

 private:
  enum class Rows : uint8_t { None, Tokens, Sampling };  // what a buffer's rows hold

  static Status fail(const PlanOp& op, const std::string& why) {
    return make_error(ErrorCode::InvalidArgument, std::string("forward plan: ") + op.name +
                                                      (op.layer >= 0 ? " of layer " + std::to_string(op.layer) : "") +
                                                      " " + why);
  }
  Status read(const PlanOp& op, PlanBuffer b) {
    const Rows rows = m_written[static_cast<size_t>(b)];
    if (rows == Rows::None) return fail(op, "reads a buffer nothing wrote before it");
    if (m_is_sampling_rows && rows != Rows::Sampling) {
      return fail(op, "reads the step's token rows where the rows that sample are (gather them first)");
    }
    return {};
  }
  Status write(const PlanOp&, PlanBuffer b) {
    m_written[static_cast<size_t>(b)] = m_is_sampling_rows ? Rows::Sampling : Rows::Tokens;
    return {};
  }
  // Ops that need every token of the step (the cache's rows, the embedding of each token).
  Status token_rows_only(const PlanOp& op) const {
    if (m_is_sampling_rows) return fail(op, "needs the step's tokens but is in the logits section");
    return {};
  }

  static bool is_expert_rows(PlanBuffer b) {
    return b == PlanBuffer::ExpertIn || b == PlanBuffer::ExpertGate || b == PlanBuffer::ExpertUp ||
           b == PlanBuffer::ExpertOut;
  }

  const ModelConfig& m_c;
  std::array<Rows, kNumBuffers> m_written{};
  bool m_is_sampling_rows = false;
  std::set<int64_t> m_kv_written;  // layers whose keys and values this pass wrote
  int32_t m_routing_layer = -2;    // the layer whose routing the backend holds
};

}  // namespace

Status check_forward_plan(const ForwardPlan& plan) {
  FlowCheck flow(plan.config);
  if (plan.body.empty() || plan.body.front().kind != PlanOpKind::Embedding) {
    return make_error(ErrorCode::InvalidArgument, "forward plan: the pass must start with the embedding");
  }
  if (plan.options.is_mtp_head) flow.provide(PlanBuffer::HiddenIn);
  for (const PlanOp& op : plan.body) IWB_RETURN_IF_ERROR(flow.op(op));
  if (plan.options.exports_hidden && plan.body.back().output != PlanBuffer::Hidden) {
    return make_error(ErrorCode::InvalidArgument, "forward plan: the body does not end with the hidden states");
  }
  // The logits ops run after the body, over the rows that sample.
  flow.enter_sampling_rows();
  for (const PlanOp& op : plan.logits) IWB_RETURN_IF_ERROR(flow.op(op));
  bool has_classifier = false;
  for (const PlanOp& op : plan.logits) {
    for (const PlanProduct& p : op.matmuls()) has_classifier = has_classifier || p.output == PlanBuffer::Logits;
  }
  if (!has_classifier) return make_error(ErrorCode::InvalidArgument, "forward plan: nothing writes the logits");
  return {};
}

}  // namespace iwb
