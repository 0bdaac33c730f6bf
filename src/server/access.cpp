#include "server/access.h"

#include <fstream>

#include "base/error.h"

namespace tachyon::server {

namespace {
std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1);
}

// Equal bytes and length, in time that depends on the lengths only.
bool same_bytes(std::string_view a, std::string_view b) {
  const size_t n = std::max(a.size(), b.size());
  size_t diff = a.size() ^ b.size();
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<size_t>(x ^ y);
  }
  return diff == 0;
}

bool valid_origin(std::string_view o) {
  const auto scheme_end = o.find("://");
  if (scheme_end == std::string_view::npos || scheme_end == 0) return false;
  const std::string_view scheme = o.substr(0, scheme_end), rest = o.substr(scheme_end + 3);
  if (scheme != "http" && scheme != "https") return false;
  if (rest.empty() || rest.find('/') != std::string_view::npos) return false;
  return rest.find_first_of(" \t,") == std::string_view::npos;
}
}  // namespace

ApiKeys::ApiKeys(std::vector<std::string> keys) {
  for (auto& k : keys)
    if (!k.empty()) keys_.push_back(std::move(k));
}

bool ApiKeys::accepts(std::string_view presented) const {
  bool ok = false;
  for (const std::string& key : keys_) ok |= same_bytes(presented, key);  // no early exit
  return ok;
}

std::vector<std::string> read_api_key_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("--api-key-file {}: cannot read the file", path);
  std::vector<std::string> keys;
  std::string line;
  while (std::getline(in, line)) {
    const std::string_view key = trim(line);
    if (key.empty() || key.front() == '#') continue;
    if (key.find_first_of(" \t") != std::string_view::npos)
      throw Error("--api-key-file {}: line {} holds spaces inside a key", path, keys.size() + 1);
    keys.emplace_back(key);
  }
  if (keys.empty()) throw Error("--api-key-file {}: no key in the file (one per line; '#' starts a comment)", path);
  return keys;
}

CorsPolicy CorsPolicy::parse(std::string_view spec) {
  CorsPolicy p;
  spec = trim(spec);
  if (spec == "*" || spec.empty()) return p;
  if (spec == "none") {
    p.mode_ = Mode::None;
    return p;
  }
  p.mode_ = Mode::List;
  while (!spec.empty()) {
    const auto comma = spec.find(',');
    const std::string_view origin = trim(spec.substr(0, comma));
    if (!valid_origin(origin))
      throw Error("--cors-origins: '{}' is not an origin (scheme://host[:port], http or https, no path)", origin);
    p.origins_.emplace_back(origin);
    spec = comma == std::string_view::npos ? std::string_view{} : spec.substr(comma + 1);
  }
  return p;
}

std::string CorsPolicy::allow_origin(std::string_view origin) const {
  switch (mode_) {
    case Mode::Any: return "*";
    case Mode::None: return "";
    case Mode::List:
      for (const auto& o : origins_)
        if (o == origin) return o;
      return "";
  }
  return "";
}

}  // namespace tachyon::server
