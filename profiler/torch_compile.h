// Kept so that includes of the former torch.compile header still build: findTorchPython and the
// Python backends (torch.compile among them) are in profiler/python_worker.h.
#pragma once

#include "profiler/python_worker.h"
