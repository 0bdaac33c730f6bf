// `tachyon info [MODEL_DIR]`: what a checkpoint is, after the fail-closed load.
#include <cstdio>

#include "cli/commands.h"
#include "cli/default_model.h"
#include "kernels/backend.h"
#include "model/model.h"

namespace tachyon::cli {

Command add_info_command(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("info", "Load a model (checking every tensor) and describe it");
  cmd->add_option("model", *dir, "Model directory (default: the embedded tachyon-demo)");
  return [dir] {
    if (dir->empty()) *dir = default_model_dir();
    auto backend = kernels::make_backend("cpu");
    auto model = model::load_model(*dir, *backend);
    const auto& c = model->config();
    std::printf("model_type      %s\nlayers          %lld\nhidden          %lld\nheads / kv      %lld / %lld (head_dim %lld)\n"
                "vocab           %lld\nbackend         %s\n",
                c.model_type.c_str(), static_cast<long long>(c.num_hidden_layers), static_cast<long long>(c.hidden_size),
                static_cast<long long>(c.num_attention_heads), static_cast<long long>(c.num_key_value_heads),
                static_cast<long long>(c.head_dim), static_cast<long long>(c.vocab_size), backend->name().c_str());
    return 0;
  };
}

}  // namespace tachyon::cli
