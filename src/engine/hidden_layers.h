// Target hidden states for several drafters in one step. A drafter names the target layers it
// reads (Drafter::hidden_layers; none: the last layer's output, as MTP reads it); the forward
// returns one list of layers for all its hidden rows (Batch::hidden_layers). Where requests of
// drafters that read different layers share a step, the step returns every layer any of them
// reads, and each drafter is handed its own layers of its request's rows.
//
//   batch.hidden_layers = step_hidden_layers({mtp->hidden_layers(), dflash->hidden_layers()}, 6);  // {5, 1, 3}
//   auto rows = drafter_hidden_rows(dflash->hidden_layers(), batch.hidden_layers, 6, hidden, out.hidden_size,
//                                   count, scratch);  // [count, 2 · hidden]
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tachyon::engine {

// The layers a step returns for drafters reading `each` (one list per drafter; a list may be
// empty: the last layer). One drafter, or several that read the same: its list as it is.
std::vector<int32_t> step_hidden_layers(const std::vector<std::vector<int32_t>>& each, int32_t num_layers);

// `count` rows of a step's hidden output (`step_row_size` floats each: the step's layers
// `step_layers`) as a drafter reading `layers` takes them: the rows themselves where the lists
// agree, else the drafter's layers gathered into `scratch`.
std::span<const float> drafter_hidden_rows(const std::vector<int32_t>& layers, const std::vector<int32_t>& step_layers,
                                           int32_t num_layers, const float* rows, int64_t step_row_size,
                                           int32_t count, std::vector<float>& scratch);

}  // namespace tachyon::engine
