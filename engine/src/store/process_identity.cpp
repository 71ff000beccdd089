// ProcessIdentity from /proc: the kernel's boot id and a process's start time.
#include "store/process_identity.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace iwb {
namespace {

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// Field 22 of /proc/PID/stat; 0 when unreadable.
int64_t process_start_ticks(int64_t pid) {
  const std::string stat = read_first_line("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');  // the command name may hold spaces and parentheses
  if (paren == std::string::npos) return 0;
  std::istringstream fields(stat.substr(paren + 1));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 22) return std::atoll(field.c_str());
  }
  return 0;
}

}  // namespace

ProcessIdentity this_process() {
  ProcessIdentity p;
  p.pid = static_cast<int64_t>(::getpid());
  p.boot_id = read_first_line("/proc/sys/kernel/random/boot_id");
  p.start_ticks = process_start_ticks(p.pid);
  return p;
}

bool may_be_alive(const ProcessIdentity& writer) {
  if (writer.pid <= 0 || writer.boot_id.empty() || writer.start_ticks == 0) return true;
  const std::string boot_id = read_first_line("/proc/sys/kernel/random/boot_id");
  if (boot_id.empty()) return true;
  if (boot_id != writer.boot_id) return false;
  return process_start_ticks(writer.pid) == writer.start_ticks;
}

}  // namespace iwb
