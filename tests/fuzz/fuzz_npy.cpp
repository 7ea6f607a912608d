// Fuzz target: the NumPy .npy reader (runtime/npy.h). A file that reads must write back and read
// again to the same dtype, shape and bytes.
#include <cstring>
#include <sstream>

#include "runtime/npy.h"
#include "tests/fuzz/fuzz_target.h"

namespace kiln::fuzz {

void npy(const uint8_t* data, size_t size) {
  expectOnlyUserErrors("npy", [&] {
    std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
    runtime::Tensor t = runtime::readNpy(in, "fuzz.npy");
    std::ostringstream out;
    runtime::writeNpy(out, "fuzz.npy", t);
    std::istringstream back(out.str());
    runtime::Tensor again = runtime::readNpy(back, "written.npy");
    if (again.dtype() != t.dtype() || again.shape() != t.shape() || again.nbytes() != t.nbytes() ||
        (t.nbytes() != 0 && std::memcmp(again.raw(), t.raw(), t.nbytes()) != 0))
      throw FuzzFailure("npy: a tensor read back differently after writeNpy");
  });
}

}  // namespace kiln::fuzz

KILN_FUZZ_ENTRY(kiln::fuzz::npy)
