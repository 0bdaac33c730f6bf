// Where a step's device time goes, kernel by kernel, inside the programmatically launched step
// (lab builds only: -DTACHYON_TIMELINE=1). Events serialise the stream, so the per-op profile
// cannot say what a kernel costs on the critical path; this records, for every CTA that reaches
// pdl_wait, the global timer when it calls the wait (it is resident: a streaming matmul's ring
// has been filling since) and when the wait returns (the kernel before it has completed), plus
// marks a kernel places itself (timeline_mark). bench/cuda/decode_timeline.py groups the records
// into launches; docs/perf/cuda.md reads them.
//
//   timeline_start(1u << 21);  ... steps ...;  auto records = timeline_stop();
#pragma once

#include <cstdint>
#include <vector>

#ifndef TACHYON_TIMELINE
#define TACHYON_TIMELINE 0
#endif

namespace tachyon::kernels::cuda {

struct TimelineRecord {
  uint64_t t_call = 0, t_return = 0;  // %globaltimer ns; a mark has both equal
  uint32_t sm = 0, block = 0, grid = 0, threads = 0, smem = 0;  // smem: dynamic bytes
  uint32_t kind = 0;                                            // 0: pdl_wait, else a TimelineMark
};
// A CTA's marks: its work is done; its input is staged; (decode attention) its chunk's state is
// written; it was counted last of its row and KV head (it merges). A CTA records each at most once.
enum TimelineMark : uint32_t { kTimelineDone = 1, kTimelineStaged = 2, kTimelineComputed = 3, kTimelineCounted = 4 };
constexpr unsigned kTimelineSlotsPerCta = 5;  // the wait's record, then one per mark kind (unused ones stay zero)

// Where one CUDA translation unit's kernels write (each unit has its own copy of the pointers).
using TimelineAttach = void (*)(TimelineRecord* records, unsigned* count, unsigned capacity);
bool timeline_register(TimelineAttach attach);  // at static initialisation, by every CUDA unit
bool timeline_built();                          // whether any unit records (a TACHYON_TIMELINE build)
void timeline_start(unsigned capacity);         // count from 0 into a fresh device buffer
std::vector<TimelineRecord> timeline_stop();    // synchronises, detaches, returns the records written

}  // namespace tachyon::kernels::cuda
