// Stop strings over streamed text: releases only text that cannot be the start of a stop
// string, and on a match releases the text before it and drops the rest.
//
//   StopMatcher stop({"\n\n", "END"});
//   for (piece : pieces) { send(stop.push(piece)); if (stop.matched()) { cancel(); break; } }
//   send(stop.flush());
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tachyon::server {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);

  // Appends `text`; returns what is now safe to release (everything before a match, once
  // one is found). After a match, push() returns "" and the rest is dropped.
  std::string push(std::string_view text);
  // End of generation: releases the held-back tail (empty after a match).
  std::string flush();
  // The stop string that matched, if any.
  const std::optional<std::string>& matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  std::optional<std::string> matched_;
};

}  // namespace tachyon::server
