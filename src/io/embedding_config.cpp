#include "io/embedding_config.h"

#include <filesystem>

#include "base/error.h"
#include "base/json.h"

namespace tachyon::io {

const char* pooling_name(Pooling pooling) {
  switch (pooling) {
    case Pooling::LastToken: return "last_token";
    case Pooling::Mean: return "mean";
    case Pooling::Cls: return "cls";
  }
  return "?";
}

std::optional<EmbeddingConfig> load_embedding_config(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path modules_path = fs::path(dir) / "modules.json";
  if (!fs::is_regular_file(modules_path)) return std::nullopt;
  const Json modules = parse_json(read_file(modules_path.string()), modules_path.string());
  if (!modules.is_array()) throw Error("{}: expected a list of modules", modules_path.string());
  std::optional<std::string> pooling_dir;
  bool normalize = false;
  for (const Json& m : modules) {
    const std::string type = m.is_object() ? m.value("type", std::string()) : std::string();
    if (type.ends_with(".Pooling")) pooling_dir = m.value("path", std::string());
    if (type.ends_with(".Normalize")) normalize = true;
  }
  if (!pooling_dir) return std::nullopt;
  const fs::path pooling_path = fs::path(dir) / *pooling_dir / "config.json";
  const Json p = parse_json(read_file(pooling_path.string()), pooling_path.string());
  auto mode = [&](const char* key) { return p.is_object() && p.value(key, false); };
  EmbeddingConfig config;
  config.normalize = normalize;
  const int modes = mode("pooling_mode_lasttoken") + mode("pooling_mode_mean_tokens") + mode("pooling_mode_cls_token") +
                    mode("pooling_mode_max_tokens") + mode("pooling_mode_mean_sqrt_len_tokens") +
                    mode("pooling_mode_weightedmean_tokens");
  if (modes != 1 || mode("pooling_mode_max_tokens") || mode("pooling_mode_mean_sqrt_len_tokens") ||
      mode("pooling_mode_weightedmean_tokens"))
    throw Error("{}: only one of pooling_mode_lasttoken, pooling_mode_mean_tokens or pooling_mode_cls_token is "
                "supported",
                pooling_path.string());
  config.pooling = mode("pooling_mode_lasttoken") ? Pooling::LastToken
                   : mode("pooling_mode_mean_tokens") ? Pooling::Mean
                                                      : Pooling::Cls;
  return config;
}

}  // namespace tachyon::io
