// The worker that opens model files off the GUI thread. It lives in its own QThread; requests
// arrive as queued slot calls and results leave as queued signals carrying plain values.
#pragma once

#include "model_info/model_details.h"

#include <QObject>
#include <QString>

namespace iwb::ui {

class ModelLoader : public QObject {
  Q_OBJECT

 public:
  explicit ModelLoader(QObject* parent = nullptr);

 public slots:
  // Parses `path`; emits exactly one of loaded() or loadFailed() for it.
  void load(const QString& path);

 signals:
  void loaded(const iwb::ui::ModelDetails& details);
  void loadFailed(const QString& path, const QString& message);
};

}  // namespace iwb::ui
