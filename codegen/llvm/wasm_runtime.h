// The runtime entry points generated kernels call, defined inside a WebAssembly module itself:
// wasm has no dynamic loader to resolve them from the process that runs it (the JavaScript
// runtime in web/ only instantiates the module), and no threads in the baseline, so a parallel
// launch runs its whole range on the calling thread.
#pragma once

namespace llvm {
class Module;
}  // namespace llvm

namespace kiln::codegen {

/// Gives a body to each of kiln_parallel_launch, kiln_parallel_launch_chunked and kiln_bounds_fail
/// that `module` declares (runtime/kernel_abi.h): the launches call `task(0, extent, closure)` once
/// (nothing for an empty range) and return its status; a failed bounds check traps (the
/// JavaScript runtime reports the trap as an error of the kernel that raised it).
void defineWasmRuntime(llvm::Module& module);

}  // namespace kiln::codegen
