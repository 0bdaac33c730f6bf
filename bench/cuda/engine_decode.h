// The engine's own decode steps on the benchmark's model (cuda_bench): greedy requests through
// engine::Engine, tokens per second of its plain decode iterations (EngineStats: wall seconds of
// the timed ones, host work included), with overlapped steps off and on. What a server's
// clients get, next to the model loop's figures above it in the table.
#pragma once

#include <vector>

#include "base/json.h"
#include "model/model.h"

namespace tachyon::bench {

// Rows "| decode batch B tok/s, engine, overlap off|on | ... |" for each batch, `runs` runs each
// (median), into stdout and `out` ("engine_decode_<b>_<off|on>").
void engine_decode_table(model::Model& model, const std::vector<int>& batches, int runs, double roofline_batch1,
                         Json& out);

}  // namespace tachyon::bench
