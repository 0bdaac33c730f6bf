#include "chat/parsers/stream_text.h"

#include <random>

namespace tachyon::chat::parsers {

MarkerHit find_marker(std::string_view text, const std::vector<std::string_view>& markers, size_t from) {
  MarkerHit best;
  for (size_t i = 0; i < markers.size(); ++i) {
    size_t at = text.find(markers[i], from);
    if (at < best.pos) {
      best.pos = at;
      best.index = i;
    }
  }
  return best;
}

size_t safe_length(std::string_view text, const std::vector<std::string_view>& markers) {
  size_t hold_from = text.size();
  for (auto m : markers) {
    size_t longest = std::min(m.size() - 1, text.size());
    for (size_t k = longest; k > 0; --k) {
      if (text.substr(text.size() - k) == m.substr(0, k)) {
        hold_from = std::min(hold_from, text.size() - k);
        break;
      }
    }
  }
  return utf8_complete_length(text.substr(0, hold_from));
}

size_t utf8_complete_length(std::string_view text) {
  size_t n = text.size();
  // Look back over at most 3 continuation bytes for a lead byte whose sequence is cut.
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    auto c = static_cast<unsigned char>(text[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte
    size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    return need > back ? n - back : n;
  }
  return n;
}

std::string random_call_id() {
  static const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 rng(std::random_device{}());
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kAlphabet[rng() % (sizeof kAlphabet - 1)];
  return id;
}

}  // namespace tachyon::chat::parsers
