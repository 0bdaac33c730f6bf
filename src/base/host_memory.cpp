#include "base/host_memory.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace tachyon {

namespace {

std::string read_text(const char* path) {
  std::ifstream in(path);
  if (!in) return {};
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

int64_t meminfo_available_bytes(const std::string& meminfo) {
  std::istringstream lines(meminfo);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    int64_t kib = -1;
    fields >> kib;
    return kib < 0 ? -1 : kib * 1024;
  }
  return -1;
}

int64_t cgroup_room_bytes(const std::string& limit, const std::string& usage) {
  std::istringstream l(limit), u(usage);
  int64_t max = -1, used = -1;
  if (!(l >> max) || !(u >> used) || max <= 0 || used < 0) return -1;  // "max" (v2 unlimited) reads as no number
  // cgroup v1 reports "no limit" as a huge page-rounded number: anything past 2^60 is unlimited.
  if (max >= (int64_t{1} << 60)) return -1;
  return std::max<int64_t>(0, max - used);
}

int64_t host_available_bytes() {
  int64_t room = meminfo_available_bytes(read_text("/proc/meminfo"));
  if (room < 0) room = INT64_MAX;
  int64_t cgroup = cgroup_room_bytes(read_text("/sys/fs/cgroup/memory.max"), read_text("/sys/fs/cgroup/memory.current"));
  if (cgroup < 0)
    cgroup = cgroup_room_bytes(read_text("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
                               read_text("/sys/fs/cgroup/memory/memory.usage_in_bytes"));
  return cgroup < 0 ? room : std::min(room, cgroup);
}

}  // namespace tachyon
