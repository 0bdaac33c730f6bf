// Who may use the server: API keys and browser origins.
//
//   ApiKeys keys({"k1"});                  // plus read_api_key_file("keys.txt")
//   keys.accepts("Bearer k1")               // false: pass the key itself
//   CorsPolicy cors = CorsPolicy::parse("https://a.example, https://b.example");
//   cors.allow_origin("https://a.example")  // "https://a.example"; another origin: ""
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tachyon::server {

// The keys a request may present. Every key is compared in full, in time that depends only on
// the lengths involved, whatever matches: a caller timing answers learns nothing of a key's
// bytes or of which key matched.
class ApiKeys {
 public:
  ApiKeys() = default;
  explicit ApiKeys(std::vector<std::string> keys);
  bool required() const { return !keys_.empty(); }
  bool accepts(std::string_view presented) const;
  size_t size() const { return keys_.size(); }

 private:
  std::vector<std::string> keys_;
};

// Keys of a file, one per line; blank lines and lines starting with '#' are skipped, spaces
// around a key trimmed. Throws tachyon::Error when the file cannot be read or holds no key
// (naming the file, never a key).
std::vector<std::string> read_api_key_file(const std::string& path);

// Which origins browsers may call the API from (Access-Control-Allow-Origin).
class CorsPolicy {
 public:
  // "*" (any origin, the default: the API key, not the origin, guards the server), "none" (no
  // CORS headers: browsers on other origins are refused), or a comma-separated list of origins
  // ("https://chat.example.com,http://localhost:3000"). Throws tachyon::Error for an origin
  // that is not scheme://host[:port].
  static CorsPolicy parse(std::string_view spec);
  // The Access-Control-Allow-Origin value for a request from `origin`; "" for none.
  std::string allow_origin(std::string_view origin) const;
  // Whether answers vary by the request's Origin (a list echoes it: caches must key on it).
  bool varies_by_origin() const { return mode_ == Mode::List; }

 private:
  enum class Mode { Any, None, List };
  Mode mode_ = Mode::Any;
  std::vector<std::string> origins_;
};

}  // namespace tachyon::server
