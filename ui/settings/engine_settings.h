// The engine's load-time settings as the user chose them (device, context, threads, the KV
// cache's memory and block size, its share of free GPU memory, tokens per step, batch-invariant
// matmuls), kept in QSettings and applied at the next load.
#pragma once

#include "worker/generation_values.h"
#include "settings/device_choice.h"

#include <QDialog>

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QSpinBox;

namespace iwb::ui {

// Reads and writes the user's choices (QSettings group "engine"); absent keys read as the
// engine's defaults (0, device "auto").
EngineLoadOptions loadEngineSettings();
void saveEngineSettings(const EngineLoadOptions& options);

// Edits EngineLoadOptions: each field shows "engine default" at 0. `kvBytesPerPosition` (0 when
// no model is loaded) lets the dialog say how many positions the chosen KV memory holds.
class EngineSettingsDialog : public QDialog {
  Q_OBJECT

 public:
  explicit EngineSettingsDialog(const EngineLoadOptions& options, quint64 kvBytesPerPosition = 0,
                                QWidget* parent = nullptr);

  EngineLoadOptions options() const;
  void setOptions(const EngineLoadOptions& options);
  // "Holds about 12,288 positions (3 contexts of 4,096)" for the KV memory chosen, or why not known.
  QString kvCapacityText() const;

  // The devices listed (the dialog asks the machine when it opens; tests pass made-up ones).
  // A chosen device that is not among them stays listed, marked as not found.
  void setDeviceList(const DeviceList& choices);
  QStringList deviceIds() const;
  QString deviceText() const;          // the selected entry's label
  QString deviceUnavailableText() const;  // the greyed line under the box; empty when hidden

 private:
  void updateCapacity();
  void updateDeviceControls();
  void selectDevice(const QString& id);

  quint64 m_kvBytesPerPosition;
  QSpinBox* m_context;
  QSpinBox* m_threads;
  QSpinBox* m_kvMiB;
  QSpinBox* m_blockSize;
  QSpinBox* m_batchTokens;
  QCheckBox* m_batchInvariant;
  QLabel* m_capacity;
  QComboBox* m_device;
  QLabel* m_deviceUnavailable;
  QDoubleSpinBox* m_kvFraction;
  QComboBox* m_loadMode;
  DeviceList m_choices;
};

}  // namespace iwb::ui
