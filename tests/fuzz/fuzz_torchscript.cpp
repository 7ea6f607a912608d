// Fuzz target: the TorchScript importer (importers/torchscript.h) on a mutated model file. The
// bytes are written to a .pt file and imported. libtorch's own rejections (c10::Error, which the
// importer normally reports as kiln::Error InvalidModel) are accepted; any other exception and any
// crash in Kiln's code are findings. A crash inside libtorch's own loader is libtorch's
// (tests/fuzz/README.md).
#include <c10/util/Exception.h>

#include "importers/torchscript.h"
#include "tests/fuzz/fuzz_target.h"

namespace kiln::fuzz {

void torchscript(const uint8_t* data, size_t size) {
  expectOnlyUserErrors("torchscript", [&] {
    std::string path = writeScratchFile(".pt", data, size);
    try {
      importers::importTorchScript(path);
    } catch (const c10::Error&) {
      // libtorch rejected the file itself (the importer normally reports this as InvalidModel).
    }
  });
}

}  // namespace kiln::fuzz

KILN_FUZZ_ENTRY(kiln::fuzz::torchscript)
