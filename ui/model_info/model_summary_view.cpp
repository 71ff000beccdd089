// ModelSummaryView: grouped forms filled from an iwb::ModelSummary.
#include "model_info/model_summary_view.h"

#include <QFormLayout>
#include <QGroupBox>
#include <QLabel>
#include <QLocale>
#include <QVBoxLayout>

namespace iwb::ui {
namespace {

const QString kMissing = QStringLiteral("—");

// "128 per layer, 8 per token, 1408 wide; 1 shared; layer 0 dense", or "none (dense)".
QString expertsText(const iwb::ModelHyperParams& h) {
  if (h.block_count <= 0) return kMissing;
  if (h.expert_count <= 0) return ModelSummaryView::tr("none (dense)");
  const QLocale locale;
  QString text = ModelSummaryView::tr("%1 per layer, %2 per token, %3 wide")
                     .arg(h.expert_count)
                     .arg(h.expert_used_count)
                     .arg(locale.toString(qlonglong{h.expert_feed_forward_length}));
  if (h.expert_shared_count > 0) {
    text += ModelSummaryView::tr("; %1 shared").arg(h.expert_shared_count);
  } else if (h.expert_shared_feed_forward_length > 0) {  // qwen35moe: one gated shared expert
    text += ModelSummaryView::tr("; a shared expert %1 wide")
                .arg(locale.toString(qlonglong{h.expert_shared_feed_forward_length}));
  }
  if (h.leading_dense_block_count == 1) {
    text += ModelSummaryView::tr("; layer 0 dense");
  } else if (h.leading_dense_block_count > 1) {
    text += ModelSummaryView::tr("; layers 0-%1 dense").arg(h.leading_dense_block_count - 1);
  }
  return text;
}

QString countOrMissing(int64_t n) { return n > 0 ? QLocale().toString(qlonglong{n}) : kMissing; }
QString textOrMissing(const std::string& s) { return s.empty() ? kMissing : QString::fromStdString(s); }

QGroupBox* makeGroup(const QString& title, QFormLayout** form, QWidget* parent) {
  auto* box = new QGroupBox(title, parent);
  *form = new QFormLayout(box);
  (*form)->setLabelAlignment(Qt::AlignLeft);
  // Labels must take the whole width: at their size hint, word-wrapped values would wrap early.
  (*form)->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  (*form)->setRowWrapPolicy(QFormLayout::DontWrapRows);
  return box;
}

// Gemma 4's layers differ: the sliding and global layers' KV heads and head sizes, and the
// shared KV layers that store nothing.
void describeLayerKv(const iwb::ModelHyperParams& h, QString* kvHeads, QString* headDim) {
  const iwb::ModelHyperParams::LayerKv* sliding = nullptr;
  const iwb::ModelHyperParams::LayerKv* global = nullptr;
  int64_t shared = 0;
  for (const iwb::ModelHyperParams::LayerKv& l : h.layer_kv) {
    if (l.head_count_kv == 0) ++shared;
    if (l.head_count_kv > 0 && l.is_sliding && sliding == nullptr) sliding = &l;
    if (l.head_count_kv > 0 && !l.is_sliding && global == nullptr) global = &l;
  }
  if (sliding != nullptr && global != nullptr) {
    *kvHeads = QObject::tr("%1 in the sliding layers, %2 in the global ones")
                   .arg(sliding->head_count_kv)
                   .arg(global->head_count_kv);
    *headDim =
        QObject::tr("%1 in the sliding layers, %2 in the global ones").arg(sliding->key_length).arg(global->key_length);
  }
  if (shared > 0) {
    *kvHeads += QObject::tr("; the last %1 layers read earlier layers' KV cache").arg(shared);
  }
}

// Qwen 3.5: "32: 24 recurrent, 8 attention (one in 4: 3, 7, …, 31)", the layer count split by
// kind with the attention layers named (a regular pattern by its first two and its last).
QString layersText(const iwb::ModelHyperParams& h) {
  const int64_t recurrent = h.num_recurrent_layers();
  if (recurrent == 0) return countOrMissing(h.trunk_layers());
  QStringList attention;
  for (size_t il = 0; il < h.layer_kv.size(); ++il) {
    if (!h.layer_kv[il].is_recurrent) attention << QString::number(il);
  }
  const int64_t interval = h.attention_layer_interval();
  if (interval > 0 && attention.size() > 3) {
    attention = {attention[0], attention[1], QStringLiteral("…"), attention.last()};
  }
  const QString where =
      interval > 0 ? ModelSummaryView::tr("one in %1: %2").arg(interval) : ModelSummaryView::tr("layers %1");
  return ModelSummaryView::tr("%1: %2 recurrent, %3 attention (%4)")
      .arg(countOrMissing(h.trunk_layers()))
      .arg(recurrent)
      .arg(h.num_attention_layers())
      .arg(where.arg(attention.join(QStringLiteral(", "))));
}

// The recurrent layers' gated delta net, or "none" for a model whose every layer attends.
QString recurrentText(const iwb::ModelHyperParams& h) {
  if (h.block_count <= 0) return kMissing;
  if (h.num_recurrent_layers() == 0) return ModelSummaryView::tr("none (every layer attends)");
  return ModelSummaryView::tr("gated delta net: %1 key / %2 value heads of %3, convolution over %4 tokens")
      .arg(h.linear_num_key_heads)
      .arg(h.linear_num_value_heads)
      .arg(h.linear_head_dim)
      .arg(h.linear_conv_kernel);
}

}  // namespace

ModelSummaryView::ModelSummaryView(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);

  QFormLayout* form = nullptr;
  layout->addWidget(makeGroup(tr("Model"), &form, this));
  addField(form, QStringLiteral("architecture"), tr("Architecture"), tr("general.architecture"));
  addField(form, QStringLiteral("name"), tr("Name"), tr("general.name, or the file name"));
  addField(form, QStringLiteral("parameters"), tr("Parameters"), tr("Elements over all tensors"));
  addField(form, QStringLiteral("fileType"), tr("File type"), tr("general.file_type, or the most common tensor type"));
  addField(form, QStringLiteral("tensorTypes"), tr("Tensor types"));

  layout->addWidget(makeGroup(tr("File"), &form, this));
  addField(form, QStringLiteral("fileSize"), tr("Size"));
  addField(form, QStringLiteral("ggufVersion"), tr("GGUF version"));
  addField(form, QStringLiteral("tensors"), tr("Tensors"));

  layout->addWidget(makeGroup(tr("Tokenizer"), &form, this));
  addField(form, QStringLiteral("tokenizerModel"), tr("Model"), tr("tokenizer.ggml.model"));
  addField(form, QStringLiteral("tokenizerPre"), tr("Pre-tokenizer"), tr("tokenizer.ggml.pre"));
  addField(form, QStringLiteral("vocabSize"), tr("Vocabulary"), tr("Number of tokens"));
  addField(form, QStringLiteral("chatTemplate"), tr("Chat template"), tr("tokenizer.chat_template"));

  layout->addWidget(makeGroup(tr("Hyper-parameters"), &form, this));
  addField(form, QStringLiteral("layers"), tr("Layers"));
  addField(form, QStringLiteral("embedding"), tr("Embedding dim"));
  addField(form, QStringLiteral("feedForward"), tr("Feed-forward dim"));
  addField(form, QStringLiteral("experts"), tr("Experts"),
           tr("A mixture of experts' routed experts per layer, how many each token goes through and each one's "
              "width; shared experts run for every token; leading dense layers have no experts"));
  addField(form, QStringLiteral("recurrent"), tr("Recurrent layers"),
           tr("Layers that keep a fixed-size state per sequence instead of a KV cache (Qwen 3.5's gated delta "
              "net); the attention heads and KV heads below are the other layers'"));
  addField(form, QStringLiteral("heads"), tr("Attention heads"));
  addField(form, QStringLiteral("kvHeads"), tr("KV heads"),
           tr("Fewer KV heads than attention heads means grouped-query attention"));
  addField(form, QStringLiteral("headDim"), tr("Head dim"), tr("Per-head key / value length"));
  addField(form, QStringLiteral("context"), tr("Context"), tr("Trained context length"));
  addField(form, QStringLiteral("ropeBase"), tr("RoPE base"));
  addField(form, QStringLiteral("rmsEps"), tr("RMS norm ε"));

  layout->addWidget(makeGroup(tr("Memory to run"), &form, this));
  addField(form, QStringLiteral("kvCache"), tr("KV cache"),
           tr("f16 keys and values for every layer at the trained context; grouped-query "
              "attention caches only the KV heads"));
  addField(form, QStringLiteral("recurrentState"), tr("Recurrent state"),
           tr("What each running sequence holds in the recurrent layers (f32), the same at any length"));
  addField(form, QStringLiteral("memoryTotal"), tr("Total"),
           tr("Weights + KV cache + scratch for activations and logits (an estimate), and one sequence's "
              "recurrent state where the model has one"));

  layout->addStretch(1);

  // One label column width across all groups, so the values line up from box to box.
  int labelWidth = 0;
  for (const QLabel* name : std::as_const(m_nameLabels)) {
    labelWidth = qMax(labelWidth, name->sizeHint().width());
  }
  for (QLabel* name : std::as_const(m_nameLabels)) name->setMinimumWidth(labelWidth);
  clear();
}

QLabel* ModelSummaryView::addField(QFormLayout* form, const QString& id, const QString& label, const QString& toolTip) {
  auto* value = new QLabel(this);
  value->setObjectName(id + QStringLiteral("Value"));
  value->setTextFormat(Qt::PlainText);  // names come from the file: never interpret markup
  value->setTextInteractionFlags(Qt::TextSelectableByMouse);
  value->setWordWrap(true);
  auto* name = new QLabel(label, this);
  if (!toolTip.isEmpty()) name->setToolTip(toolTip);
  m_nameLabels << name;
  form->addRow(name, value);
  m_fields.insert(id, value);
  m_fieldOrder << id;
  return value;
}

void ModelSummaryView::setField(const QString& id, const QString& text, const QString& toolTip) {
  QLabel* label = m_fields.value(id);
  Q_ASSERT(label);
  label->setText(text);
  label->setToolTip(toolTip);
}

QString ModelSummaryView::fieldText(const QString& field) const {
  const QLabel* label = m_fields.value(field);
  return label ? label->text() : QString();
}

void ModelSummaryView::clear() {
  for (QLabel* label : std::as_const(m_fields)) {
    label->setText(kMissing);
    label->setToolTip({});
  }
}

void ModelSummaryView::setSummary(const iwb::ModelSummary& s) {
  const QLocale locale;
  setField(QStringLiteral("architecture"), textOrMissing(s.architecture));
  setField(QStringLiteral("name"), textOrMissing(s.name));
  setField(QStringLiteral("parameters"),
           s.is_vocab_only ? tr("none (vocabulary-only file)") : QString::fromStdString(format_count(s.num_params)),
           tr("%1 parameters").arg(locale.toString(qulonglong{s.num_params})));
  setField(QStringLiteral("fileType"), textOrMissing(s.file_type));

  QStringList typeLines;
  int64_t numTensors = 0;
  for (const auto& [type, totals] : s.totals_by_type) {
    numTensors += totals.num_tensors;
    const QString count =
        totals.num_tensors == 1 ? tr("1 tensor") : tr("%1 tensors").arg(locale.toString(qlonglong{totals.num_tensors}));
    typeLines << QStringLiteral("%1 — %2, %3")
                     .arg(QString::fromStdString(type), count, QString::fromStdString(format_bytes(totals.num_bytes)));
  }
  setField(QStringLiteral("tensorTypes"), typeLines.isEmpty() ? kMissing : typeLines.join('\n'));

  setField(QStringLiteral("fileSize"), QString::fromStdString(format_bytes(s.file_size)),
           tr("%1 bytes").arg(locale.toString(qulonglong{s.file_size})));
  setField(QStringLiteral("ggufVersion"), QString::number(s.gguf_version));
  setField(QStringLiteral("tensors"),
           tr("%1 (%2 of data)")
               .arg(locale.toString(qlonglong{numTensors}), QString::fromStdString(format_bytes(s.tensor_bytes))));

  setField(QStringLiteral("tokenizerModel"), textOrMissing(s.tokenizer_model));
  setField(QStringLiteral("tokenizerPre"), textOrMissing(s.tokenizer_pre));
  setField(QStringLiteral("vocabSize"), countOrMissing(s.tokenizer_vocab_size));
  setField(QStringLiteral("chatTemplate"), s.has_chat_template ? tr("yes") : tr("no"));

  const ModelHyperParams& h = s.hparams;
  QString layers = layersText(h);
  if (h.nextn_predict_layers > 0) {
    layers = tr("%1 (+%2 multi-token prediction, the MTP drafter's)").arg(layers).arg(h.nextn_predict_layers);
  }
  setField(QStringLiteral("layers"), layers);
  setField(QStringLiteral("embedding"), countOrMissing(h.embedding_length));
  setField(QStringLiteral("feedForward"), countOrMissing(h.feed_forward_length));
  setField(QStringLiteral("experts"), expertsText(h));
  setField(QStringLiteral("recurrent"), recurrentText(h));
  setField(QStringLiteral("heads"), countOrMissing(h.head_count));
  QString kvHeads = countOrMissing(h.head_count_kv);
  if (h.kv_lora_rank > 0) {
    kvHeads += tr("  (latent attention: one latent per token, shared by all %1 heads)").arg(h.head_count);
  } else if (h.head_count > 0 && h.head_count_kv > 0 && h.head_count_kv < h.head_count) {
    kvHeads += tr("  (grouped-query, %1 heads per KV head)").arg(h.head_count / h.head_count_kv);
  }
  QString headDim = countOrMissing(h.key_length);
  if (h.value_length > 0 && h.value_length != h.key_length) {
    headDim += QStringLiteral(" / ") + countOrMissing(h.value_length);
  }
  if (h.kv_lora_rank > 0) {
    // What the cache holds per token (the latent and the roped key values), then each head's
    // widths once decompressed.
    headDim += tr("  (latent %1 + %2 roped; per head q/k %3, v %4)")
                   .arg(h.kv_lora_rank)
                   .arg(h.key_length - h.kv_lora_rank)
                   .arg(h.key_length_mla)
                   .arg(h.value_length_mla);
  }
  if (h.num_recurrent_layers() > 0) {
    kvHeads += tr("; attention layers only");
  } else if (!h.layer_kv.empty()) {
    describeLayerKv(h, &kvHeads, &headDim);
  }
  setField(QStringLiteral("kvHeads"), kvHeads);
  setField(QStringLiteral("headDim"), headDim);
  setField(QStringLiteral("context"), countOrMissing(h.context_length));
  setField(QStringLiteral("ropeBase"), h.rope_freq_base > 0 ? locale.toString(h.rope_freq_base, 'g', 8) : kMissing);
  setField(QStringLiteral("rmsEps"), h.rms_norm_eps > 0 ? QString::number(h.rms_norm_eps, 'g', 3) : kMissing);

  if (s.is_vocab_only || h.context_length <= 0) {
    setField(QStringLiteral("kvCache"), kMissing);
    setField(QStringLiteral("recurrentState"), kMissing);
    setField(QStringLiteral("memoryTotal"), kMissing);
  } else {
    const MemoryEstimate memory = estimate_memory(s, h.context_length);
    QString kvCache = tr("%1 at %2 tokens")
                          .arg(QString::fromStdString(format_bytes(memory.kv_cache_bytes)),
                               locale.toString(qlonglong{h.context_length}));
    if (h.num_recurrent_layers() > 0) kvCache += tr(" (the %1 attention layers)").arg(h.num_attention_layers());
    setField(QStringLiteral("kvCache"), kvCache);
    setField(QStringLiteral("recurrentState"),
             memory.recurrent_state_bytes > 0
                 ? tr("%1 per sequence").arg(QString::fromStdString(format_bytes(memory.recurrent_state_bytes)))
                 : tr("none"),
             memory.recurrent_state_bytes > 0
                 ? tr("%1 bytes: in each of %2 layers the convolution's last %3 inputs and %4 heads' %5 x %5 state")
                       .arg(locale.toString(qulonglong{memory.recurrent_state_bytes}))
                       .arg(h.num_recurrent_layers())
                       .arg(h.linear_conv_kernel - 1)
                       .arg(h.linear_num_value_heads)
                       .arg(h.linear_head_dim)
                 : QString());
    QString parts = tr("Weights %1 + KV cache %2 + scratch %3")
                        .arg(QString::fromStdString(format_bytes(memory.weight_bytes)),
                             QString::fromStdString(format_bytes(memory.kv_cache_bytes)),
                             QString::fromStdString(format_bytes(memory.scratch_bytes)));
    if (memory.recurrent_state_bytes > 0) {
      parts += tr(" + one sequence's recurrent state %1")
                   .arg(QString::fromStdString(format_bytes(memory.recurrent_state_bytes)));
    }
    setField(QStringLiteral("memoryTotal"), QString::fromStdString(format_bytes(memory.total())), parts);
  }
}

}  // namespace iwb::ui
