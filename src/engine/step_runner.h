// The execute stage of a step: forms the model::Batch of a scheduled plan (rows, the outputs
// the step needs, draft trees), runs the forward, and reads its outputs. Plain decode steps
// overlap: the next step is issued before this one's tokens are read, its rows reading them
// on the device, so the device does not idle while the host commits.
//
//   IssuedStep step;  step.plan = scheduler.schedule();
//   runner.execute(step);                       // the forward, issued
//   if (!runner.collect_outputs(step)) fail(step.failure);
//   commit.commit_step(step.plan, runner.batch(), step.out);
//   ... next iteration: if (auto ahead = runner.take_step_ahead()) its tokens follow these.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/loop_state.h"

namespace tachyon::engine {

// A step sent to the backend, and what the iteration that reads its tokens needs of it.
struct IssuedStep {
  StepPlan plan;
  model::StepOutput out;
  Clock::time_point t0;     // when the device started on it (issued ahead: when the step before was read)
  bool timed = true;        // no one-time work (a graph captured) during its forward
  bool decode_only = true;  // every chunk is one committed token (+ its drafts): no prompt rows
  int32_t step_drafts = 0;  // draft rows this step verifies
  double drafting_seconds = 0;
  std::string failure;      // its forward's error, reported to its requests when it is read
};

class StepRunner {
 public:
  explicit StepRunner(LoopState& state);

  bool has_step_ahead() const { return ahead_.has_value(); }
  // The step issued ahead during the last collect_outputs (its tokens follow the last step's),
  // or nullopt. batch() is empty then: such a step has no hidden rows.
  std::optional<IssuedStep> take_step_ahead();

  // Forms the batch of step.plan's chunks and issues its forward (its tokens read later where
  // the overlap allows). Drafts the plan does not compute are dropped first.
  void execute(IssuedStep& step);

  // The output stage: issues the next step ahead where it may, then waits for this step's
  // tokens. False when the forward failed (step.failure); else the rows of requests retired
  // since the step was issued are dropped from step.plan and step.out.
  bool collect_outputs(IssuedStep& step);

  // Shutdown: waits for a step still in flight.
  void wait_in_flight();

  // The batch of the last executed step (its hidden rows locate hidden states in the output).
  const model::Batch& batch() const { return batch_; }

 private:
  void issue_ahead(const StepPlan& plan, const model::StepOutput& out);
  void drop_retired_rows(StepPlan& plan, model::StepOutput& out);

  LoopState& state_;
  const bool overlap_;
  model::Batch batch_, ahead_batch_;
  std::optional<IssuedStep> ahead_;         // issued, its tokens not read yet (issue_ahead)
  std::vector<int32_t> tree_rows_parents_;  // scratch: a tree's parents with the root's
};

}  // namespace tachyon::engine
