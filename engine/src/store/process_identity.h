// Who is writing a "running" row of the results store, so a later opener can tell a run whose
// process died (killed, crashed, machine rebooted) from one another process is still writing.
#pragma once

#include <cstdint>
#include <string>

namespace iwb {

struct ProcessIdentity {
  int64_t pid = 0;
  std::string boot_id;      // /proc/sys/kernel/random/boot_id; empty where unknown
  int64_t start_ticks = 0;  // /proc/PID/stat field 22 (start time since boot); 0 where unknown
};

ProcessIdentity this_process();
// False only when the recorded writer is certainly gone: another boot, no such process, or a
// reused pid (a different start time). Where /proc cannot tell, true: the row is left alone.
bool may_be_alive(const ProcessIdentity& writer);

}  // namespace iwb
