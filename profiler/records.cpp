#include "profiler/records.h"

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

}  // namespace kiln::profiler
