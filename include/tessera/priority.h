// tessera/priority.h — tessera::priority, the urgency of a job.
//
// `task_group`, the parallel algorithms and `task_graph` take one; a worker
// takes the most urgent job it can see, except that among any 16 consecutive
// job picks one starts at `low` and one at `normal`, so a low job progresses
// at ≥ 1/16 of a worker's picks under any flood of urgent ones (see
// tessera/jobs.h).
#pragma once

#include <cstdint>

namespace tessera {

/// Priority of a job: a frame's critical path runs `high`, background
/// streaming `low`. The values index the scheduler's per-priority queues.
enum class priority : std::uint8_t { high = 0, normal = 1, low = 2 };

}  // namespace tessera
