// Static memory planning for intermediate tensors: slots whose lifetimes (first write to last
// read, in call order) do not overlap share one storage block. Greedy best-fit over freed
// blocks, in the spirit of TVM's graph memory planner.
#pragma once

#include <cstddef>
#include <vector>

#include "runtime/graph_plan.h"

namespace kiln::runtime {

struct MemoryPlan {
  std::vector<size_t> blockBytes;  // one entry per storage block
  std::vector<int> slotBlock;      // per slot: its block, or -1 (inputs, constants)
  size_t totalBytes() const;
  size_t unplannedBytes = 0;       // what one block per intermediate would have needed
};

MemoryPlan planMemory(const GraphPlan& plan);

}  // namespace kiln::runtime
