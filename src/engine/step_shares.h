// A batched step's time split among its requests, for the speculation policy's clocks (auto-k's
// step costs, the gates' speculative and plain rates). An equal split charged a request nothing
// for its own verify rows while others shared the step, so at 8 clients auto-k kept prompt
// lookup at its k_max on the CPU, where each row costs compute (chat prose through the server:
// 0.88x the total tok/s of k_max 4 at 8 clients, 1.16x at one). Here a step is modelled as
// a + b·rows (every row it computed), b fitted online over the timed decode steps, and a request
// is charged the fixed part's equal share plus its own rows at b: (T − b·R)/n + b·rows. With one
// request that is the whole step; where rows are nearly free (a GPU streaming its weights) b is
// near 0 and it is the equal split.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tachyon::engine {

class StepShares {
 public:
  // A timed decode step (no prompt chunks) of `rows` rows that took `seconds`.
  void record(int64_t rows, double seconds);
  // The fitted seconds per row (b): 0 until the steps' row counts have varied.
  double row_seconds() const;
  // What a request with `rows` of the step's `total_rows` rows, one of `requests`, is charged of
  // the step's `seconds` (the shares of a step add up to it).
  double share(double seconds, int64_t rows, int64_t total_rows, size_t requests) const;

 private:
  // Exponentially decayed sums of 1, R, T, R², R·T over the recorded steps (least squares).
  double n_ = 0, r_ = 0, t_ = 0, rr_ = 0, rt_ = 0;
};

}  // namespace tachyon::engine
