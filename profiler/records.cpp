#include "profiler/records.h"

#include <cmath>

namespace kiln::profiler {

const char* statusName(Status s) {
  switch (s) {
    case Status::Ok: return "ok";
    case Status::Unavailable: return "unavailable";
    case Status::Failed: return "failed";
    case Status::OutOfMemory: return "out-of-memory";
    case Status::Timeout: return "timeout";
    case Status::Skipped: return "skipped";
  }
  return "failed";
}

Status parseStatus(const std::string& name) {
  for (Status s : {Status::Ok, Status::Unavailable, Status::Failed, Status::OutOfMemory, Status::Timeout,
                   Status::Skipped})
    if (name == statusName(s)) return s;
  return Status::Failed;
}

bool outputsDiffer(double maxAbsDiff, double outputBound) {
  if (outputBound < 0) return false;
  if (std::isnan(maxAbsDiff)) return true;
  return maxAbsDiff >= 0 && maxAbsDiff > outputBound;
}

}  // namespace kiln::profiler
