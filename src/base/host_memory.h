// Memory this process may still take on the host: the kernel's MemAvailable, bounded by the
// cgroup's limit when it runs in a container (cgroup v2 memory.max - memory.current, or v1's
// limit_in_bytes - usage_in_bytes), since MemAvailable counts the whole machine.
//
//   const int64_t room = host_available_bytes();   // INT64_MAX when nothing says
#pragma once

#include <cstdint>
#include <string>

namespace tachyon {

int64_t host_available_bytes();

// The pieces, for tests: MemAvailable of a /proc/meminfo text (nullopt-like -1 when absent),
// and the room left under a cgroup limit given the texts of its limit and usage files
// (-1 when unlimited or unreadable).
int64_t meminfo_available_bytes(const std::string& meminfo);
int64_t cgroup_room_bytes(const std::string& limit, const std::string& usage);

}  // namespace tachyon
