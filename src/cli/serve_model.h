// Building one served model for `tachyon serve`: tokenizer, chat template, weights, drafter and
// engine, with the listing details and sampling defaults the handlers read. Every model of a
// server is built here, the first at start-up and the others when a request first names them.
//
//   ServeModelOptions o;                                    // the serve flags every model shares
//   auto served = build_served_model(resolve_model_arg("qwen3-8b"), "qwen3-8b", o, /*ticker=*/true);
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "cli/pflash_options.h"
#include "cli/spec_options.h"
#include "io/model_resolve.h"
#include "server/generation.h"

namespace tachyon::cli {

struct ServeModelOptions {
  std::string device, prefix_cache = "on", tool_parser, step_overlap = "auto", kv_cache_dtype = "auto";
  std::string quantize;  // --quantize
  std::string quantize_decode;  // --quantize-decode
  std::string int8_activations;  // --int8-activations
  int tensor_parallel = 1;  // --tensor-parallel
  int32_t max_concurrent = 16, ctx_size = 0, kv_blocks = 0, max_tokens_per_step = 512;
  // KV pool (engine/kv_sizing.h): --kv-blocks, else --kv-cache-memory bytes, else sized from the
  // machine (a GPU: --gpu-memory-utilization; the CPU: a share of the available memory).
  int64_t kv_cache_memory = 0;
  double gpu_memory_utilization = 0.90;
  // The prefix cache's disk tier (--prefix-cache-dir, --prefix-cache-disk-bytes) and the
  // response cache (--response-cache BYTES; 0: off).
  std::string prefix_cache_dir;
  int64_t prefix_cache_disk_bytes = int64_t{16} << 30;
  int64_t response_cache_bytes = 0;
  int64_t swap_space_bytes = -1;  // --swap-space (engine::EngineConfig::swap_space_bytes; -1: auto)
  SpecOptions spec;
  PflashOptions pflash;
};

// The model ready to serve; it owns its backend, weights, drafter and engine (ServedModel::owner).
// `ticker`: a ticking elapsed-time line per stage on a terminal (start-up only; a load during
// serving logs plain lines). Throws tachyon::Error.
std::shared_ptr<const server::ServedModel> build_served_model(const io::ResolvedModel& resolved,
                                                              const std::string& served_name,
                                                              const ServeModelOptions& options, bool ticker);

// Bytes the model will hold once built: its weight files and, when --kv-cache-memory fixes it,
// its KV cache (a pool sized from the machine takes a share of what is free at load time).
int64_t served_model_footprint(const std::string& dir, const ServeModelOptions& options);

// What listings show of a model before it is loaded: config.json and the safetensors headers.
server::ModelDetails describe_model(const std::string& dir, const ServeModelOptions& options);

}  // namespace tachyon::cli
