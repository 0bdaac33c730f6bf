#include "model/shard_plan.h"

#include <variant>

#include "base/error.h"
#include "model/registry.h"

namespace tachyon::model {

const char* shard_kind_name(ShardKind kind) {
  switch (kind) {
    case ShardKind::Replicate: return "replicate";
    case ShardKind::Rows: return "rows";
    case ShardKind::Cols: return "cols";
    case ShardKind::FirstRank: return "first-rank";
  }
  return "?";
}

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void require_divides(const io::ModelConfig& c, const char* field, int64_t value, int world) {
  if (value % world != 0)
    throw Error("{}: tensor parallelism over {} ranks needs {} ({}) divisible by {}", c.path, world, field, value,
                world);
}

}  // namespace

ShardKind ShardPlan::kind_of(const std::string& t) const {
  if (world == 1) return ShardKind::Replicate;
  for (const char* p : {".self_attn.q_proj.", ".self_attn.k_proj.", ".self_attn.v_proj.", ".mlp.gate_proj.", ".mlp.up_proj."})
    if (t.find(p) != std::string::npos && (ends_with(t, ".weight") || ends_with(t, ".bias"))) return ShardKind::Rows;
  for (const char* p : {".self_attn.o_proj.", ".mlp.down_proj."}) {
    if (t.find(p) == std::string::npos) continue;
    if (ends_with(t, ".weight")) return ShardKind::Cols;
    if (ends_with(t, ".bias")) return ShardKind::FirstRank;
  }
  return ShardKind::Replicate;
}

ShardPlan plan_tensor_parallel(const io::ModelConfig& config, int world) {
  if (world < 1) throw Error("--tensor-parallel must be at least 1 (got {})", world);
  ShardPlan plan;
  plan.world = world;
  plan.rank_config = config;
  if (world == 1) return plan;
  const DecoderSpec spec = decoder_spec_of(config);
  for (size_t l = 0; l < spec.layers.size(); ++l) {
    const LayerSpec& layer = spec.layers[l];
    const auto* a = std::get_if<AttentionOptions>(&layer.mixer);
    if (!a)
      throw Error("{}: tensor parallelism does not shard layer {}'s mixer yet (MLA / linear attention; model_type '{}')",
                  config.path, l, config.model_type);
    if (a->output_gate || a->sinks)
      throw Error("{}: tensor parallelism does not shard attention {} yet (layer {}, model_type '{}')", config.path,
                  a->output_gate ? "output gates" : "sinks", l, config.model_type);
    if (!std::holds_alternative<GatedMlpOptions>(layer.ffn))
      throw Error("{}: tensor parallelism does not shard mixture-of-experts layers yet (layer {}, model_type '{}')",
                  config.path, l, config.model_type);
    if (layer.mixer_name != "self_attn" || layer.ffn_name != "mlp")
      throw Error("{}: tensor parallelism knows the tensor names self_attn.* and mlp.*, not {}.* / {}.*", config.path,
                  layer.mixer_name, layer.ffn_name);
  }
  require_divides(config, "num_attention_heads", config.num_attention_heads, world);
  require_divides(config, "num_key_value_heads", config.num_key_value_heads, world);
  require_divides(config, "intermediate_size", config.intermediate_size, world);
  io::ModelConfig& r = plan.rank_config;
  r.num_attention_heads /= world;
  r.num_key_value_heads /= world;
  r.intermediate_size /= world;
  return plan;
}

}  // namespace tachyon::model
