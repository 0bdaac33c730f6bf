#include "base/json.h"

#include <fstream>
#include <sstream>

#include "base/error.h"

namespace tachyon {

Json parse_json(std::string_view text, std::string_view what) {
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::exception& e) {  // parse_error, and out_of_range for a number past a double (1e400)
    throw Error("{}: not valid JSON: {}", what, e.what());
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open '{}'", path);
  std::ostringstream out;
  out << in.rdbuf();
  if (in.bad()) throw Error("cannot read '{}'", path);
  return out.str();
}

}  // namespace tachyon
