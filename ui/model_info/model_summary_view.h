// The summary form of an opened model: identity, file, tokenizer and hyper-parameters, as
// label pairs grouped in boxes. Values are selectable so they can be copied.
#pragma once

#include "iwb/engine/model/model_info.h"

#include <QHash>
#include <QWidget>

class QFormLayout;
class QLabel;

namespace iwb::ui {

class ModelSummaryView : public QWidget {
  Q_OBJECT

 public:
  explicit ModelSummaryView(QWidget* parent = nullptr);

  void setSummary(const iwb::ModelSummary& summary);
  void clear();

  // Text of one value by field id ("architecture", "parameters", "vocabSize", ...); the
  // label's objectName is the id plus "Value". Empty for unknown ids.
  QString fieldText(const QString& field) const;
  QStringList fieldIds() const { return m_fieldOrder; }

 private:
  QLabel* addField(QFormLayout* form, const QString& id, const QString& label,
                   const QString& toolTip = {});
  void setField(const QString& id, const QString& text, const QString& toolTip = {});

  QHash<QString, QLabel*> m_fields;
  QList<QLabel*> m_nameLabels;
  QStringList m_fieldOrder;
};

}  // namespace iwb::ui
