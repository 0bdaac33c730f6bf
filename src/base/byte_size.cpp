#include "base/byte_size.h"

#include <cctype>
#include <charconv>
#include <cmath>

#include "base/error.h"

namespace tachyon {

int64_t parse_byte_size(std::string_view text) {
  const std::string_view original = text;
  auto bad = [&] {
    return Error("'{}' is not a byte size (write e.g. 8G, 512M, 1.5GiB or a number of bytes)", original);
  };
  double number = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (ec != std::errc() || end == text.data() || !(number >= 0)) throw bad();
  std::string unit(end, text.data() + text.size());
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.size() == 3 && unit.substr(1) == "IB") unit.resize(1);
  else if (unit.size() == 2 && unit[1] == 'B') unit.resize(1);
  int shift = 0;
  if (unit == "K") shift = 10;
  else if (unit == "M") shift = 20;
  else if (unit == "G") shift = 30;
  else if (unit == "T") shift = 40;
  else if (!unit.empty() && unit != "B") throw bad();
  const double bytes = std::floor(number * std::ldexp(1.0, shift));
  if (bytes >= 9.2e18) throw bad();
  return static_cast<int64_t>(bytes);
}

std::string format_byte_size(int64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", v, units[u]);
}

}  // namespace tachyon
