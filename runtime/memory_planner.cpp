#include "runtime/memory_planner.h"

#include <algorithm>
#include <numeric>

namespace kiln::runtime {

size_t MemoryPlan::totalBytes() const {
  return std::accumulate(blockBytes.begin(), blockBytes.end(), size_t{0});
}

MemoryPlan planMemory(const GraphPlan& plan) {
  const int numSlots = static_cast<int>(plan.slots.size());
  const int numCalls = static_cast<int>(plan.calls.size());
  std::vector<int> firstDef(numSlots, -1), lastUse(numSlots, -1);
  for (int c = 0; c < numCalls; ++c) {
    const KernelCall& call = plan.calls[c];
    for (int slot : call.args) {
      if (firstDef[slot] < 0) firstDef[slot] = c;
      lastUse[slot] = c;
    }
  }
  // Graph outputs live until the end.
  for (int slot : plan.outputs) lastUse[slot] = numCalls;

  MemoryPlan mp;
  mp.slotBlock.assign(numSlots, -1);
  std::vector<int> freeBlocks;
  // Release lists: slots whose last use is call c free their block after call c.
  std::vector<std::vector<int>> releaseAfter(numCalls + 1);
  for (int s = 0; s < numSlots; ++s) {
    if (plan.slots[s].kind == SlotKind::Intermediate && lastUse[s] >= 0)
      releaseAfter[lastUse[s]].push_back(s);
  }
  for (int c = 0; c < numCalls; ++c) {
    const KernelCall& call = plan.calls[c];
    for (int slot : call.args) {
      const TensorSlot& ts = plan.slots[slot];
      if (ts.kind != SlotKind::Intermediate || mp.slotBlock[slot] >= 0) continue;
      size_t bytes = static_cast<size_t>(numElements(ts.shape)) * dtypeSize(ts.dtype);
      mp.unplannedBytes += bytes;
      // Best fit: the smallest free block that is large enough, else grow the largest one.
      int best = -1;
      for (size_t i = 0; i < freeBlocks.size(); ++i) {
        int b = freeBlocks[i];
        if (mp.blockBytes[b] >= bytes && (best < 0 || mp.blockBytes[b] < mp.blockBytes[freeBlocks[best]]))
          best = static_cast<int>(i);
      }
      if (best < 0 && !freeBlocks.empty()) {
        best = static_cast<int>(std::max_element(freeBlocks.begin(), freeBlocks.end(),
                                                 [&](int a, int b) { return mp.blockBytes[a] < mp.blockBytes[b]; }) -
                                freeBlocks.begin());
        mp.blockBytes[freeBlocks[best]] = bytes;
      }
      if (best >= 0) {
        mp.slotBlock[slot] = freeBlocks[best];
        freeBlocks.erase(freeBlocks.begin() + best);
      } else {
        mp.slotBlock[slot] = static_cast<int>(mp.blockBytes.size());
        mp.blockBytes.push_back(bytes);
      }
    }
    // A call may not write its output into a block freed by its own inputs, so release after.
    for (int slot : releaseAfter[c]) {
      if (mp.slotBlock[slot] >= 0) freeBlocks.push_back(mp.slotBlock[slot]);
    }
  }
  return mp;
}

}  // namespace kiln::runtime
