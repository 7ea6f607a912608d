// How closely libtorch's int8 kernels can serve as the reference on this CPU. With VNNI
// (avx512_vnni or avx_vnni) they were bit-exact against Kiln's. On a CPU without it (the AMD EPYC
// Zen 3 these tests also run on) libtorch's u8 x s8 convolutions and linear layers differ from an
// exact computation, by up to 28 steps on 2-12 % of a single op's outputs and on 43-87 % of the
// quantized networks' (the int16 pair sums, vpmaddubsw, of its AVX2 path saturate). So the tests
// check Kiln against an exact int8 reference exported with each module (export_models.py,
// _exact_reference), and against libtorch too only where libtorch is exact, which checks the
// reference itself.
#pragma once

#include <fstream>
#include <string>

namespace kiln::testing_support {

inline bool int8ReferenceIsExact() {
  static const bool exact = [] {
    std::ifstream cpuinfo("/proc/cpuinfo");
    for (std::string line; std::getline(cpuinfo, line);)
      if (line.rfind("flags", 0) == 0)
        return line.find(" avx512_vnni") != std::string::npos || line.find(" avx_vnni") != std::string::npos;
    return false;
  }();
  return exact;
}

}  // namespace kiln::testing_support
