// Byte sizes as written on command lines, and the host-memory readers' parsing.
#include "base/byte_size.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "base/host_memory.h"

namespace tachyon {
namespace {

TEST(ByteSize, ParsesSuffixesAsPowersOf1024) {
  EXPECT_EQ(parse_byte_size("1073741824"), int64_t{1} << 30);
  EXPECT_EQ(parse_byte_size("8G"), int64_t{8} << 30);
  EXPECT_EQ(parse_byte_size("8g"), int64_t{8} << 30);
  EXPECT_EQ(parse_byte_size("512M"), int64_t{512} << 20);
  EXPECT_EQ(parse_byte_size("512MB"), int64_t{512} << 20);
  EXPECT_EQ(parse_byte_size("1.5GiB"), int64_t{3} << 29);
  EXPECT_EQ(parse_byte_size("64k"), int64_t{64} << 10);
  EXPECT_EQ(parse_byte_size("2T"), int64_t{2} << 40);
  EXPECT_EQ(parse_byte_size("100B"), 100);
}

TEST(ByteSize, RejectsWhatIsNotASize) {
  for (const char* bad : {"", "G", "lots", "8X", "8GG", "-1G", "8 G", "1e30G"}) {
    try {
      parse_byte_size(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

TEST(ByteSize, FormatsInBinaryUnits) {
  EXPECT_EQ(format_byte_size(512), "512 B");
  EXPECT_EQ(format_byte_size(int64_t{3} << 29), "1.5 GiB");
  EXPECT_EQ(format_byte_size(int64_t{40} << 20), "40.0 MiB");
}

TEST(HostMemory, ReadsMemAvailableInKib) {
  EXPECT_EQ(meminfo_available_bytes("MemTotal:  16000000 kB\nMemFree:  100 kB\nMemAvailable:    2048 kB\n"),
            2048 * 1024);
  EXPECT_EQ(meminfo_available_bytes("MemTotal: 1 kB\n"), -1);
}

TEST(HostMemory, CgroupRoomIsLimitLessUsageUnlessUnlimited) {
  EXPECT_EQ(cgroup_room_bytes("1073741824\n", "73741824\n"), 1000000000);
  EXPECT_EQ(cgroup_room_bytes("max\n", "73741824\n"), -1);                     // v2: no limit
  EXPECT_EQ(cgroup_room_bytes("9223372036854771712\n", "73741824\n"), -1);    // v1: no limit
  EXPECT_EQ(cgroup_room_bytes("100\n", "200\n"), 0);                         // over the limit
  EXPECT_EQ(cgroup_room_bytes("", ""), -1);                                   // no such file
  EXPECT_GT(host_available_bytes(), 0);
}

}  // namespace
}  // namespace tachyon
