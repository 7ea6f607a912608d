// Ahead-of-time compilation for export: loop-IR functions → one object file for a target (the
// same LLVM module and O3 pipeline as the JIT, so the kernels compute the same bits) → a shared
// library linked by the system's C compiler driver, or for a cross Linux target by Debian's cross
// driver for its architecture (aarch64-linux-gnu-gcc); a WebAssembly target (wasm32) gets a
// `kernels.wasm` linked by LLVM's wasm-ld against wasi-libc (libm, memcpy, aligned_alloc), with the
// runtime entry points defined inside it (codegen/llvm/wasm_runtime.h), for the JavaScript runtime
// in web/; a target of another OS gets the object file.
//
// The library exports one `void NAME(void* const* args)` per function (runtime/kernel_abi.h) and
// the C string runtime::kModuleSignatureSymbol; it needs libm and leaves kiln_parallel_launch
// undefined, to be resolved from the process that loads it (the runtime defines it).
#pragma once

#include <string>
#include <vector>

#include "codegen/target.h"
#include "core/tir/stmt.h"

namespace kiln::codegen {

/// Compiles `funcs` into a relocatable object file at `path`, defining the module signature
/// symbol as the C string `signature`. Throws kiln::Error (Io) when the file cannot be written.
void emitObjectFile(const std::vector<core::tir::PrimFunc>& funcs, const Target& target, const std::string& path,
                    const std::string& signature);

/// Every instruction-set and tuning feature LLVM enables for the target (the CPU's implied ones
/// included), by LLVM name, sorted: what the runtime checks a machine against before loading.
std::vector<std::string> targetFeatures(const Target& target);

/// True when `target` has this machine's architecture and OS, so the host driver can link it
/// (whether this CPU can also run it is Target::runnable).
bool isHostSystem(const Target& target);

/// The name of Debian's cross compiler driver for a Linux target: `ARCH-linux-gnu-gcc`
/// (`aarch64-linux-gnu-gcc` for aarch64-unknown-linux-gnu).
std::string crossDriverName(const Target& target);

/// The compiler driver that links shared libraries for `target`: $KILN_CC when set, else `cc`
/// for the host system, else crossDriverName(target) for a cross Linux target when it is on
/// PATH. Empty when there is none.
std::string findLinkerDriver(const Target& target);

/// Runs `driver -shared -o library object -lm` (no shell). Throws kiln::Error with the driver's
/// first error line when it fails, or when the driver cannot be started.
void linkSharedLibrary(const std::string& driver, const std::string& object, const std::string& library);

/// True for the WebAssembly triples (wasm32-*, wasm64-*).
bool isWasmTarget(const Target& target);

/// The library file a module for `target` holds: "kernels.wasm" for WebAssembly, else
/// "kernels.so" (runtime::kModuleLibraryFile).
std::string libraryFileName(const Target& target);

/// LLVM's WebAssembly linker: $KILN_WASM_LD when set, else wasm-ld-19 or wasm-ld on PATH, else
/// /usr/lib/llvm-19/bin/wasm-ld (Debian's lld-19). Empty when there is none.
std::string findWasmLinker();

/// wasi-libc's static C library (wasm32): $KILN_WASI_LIBC when set, else Debian's
/// /usr/lib/wasm32-wasi/libc.a (package wasi-libc). Empty when it is not there.
std::string findWasiLibc();

/// Runs `linker -o library object libc --no-entry ...` exporting `exports` (the kernels and the
/// signature), aligned_alloc and free (the JavaScript runtime allocates tensors with them) and
/// the memory. Throws kiln::Error with the linker's first error line when it fails.
void linkWasmModule(const std::string& linker, const std::string& libc, const std::string& object,
                    const std::string& library, const std::vector<std::string>& exports);

struct ExportedLibrary {
  std::string objectPath;   // the object file, kept only when it could not be linked
  std::string libraryPath;  // the shared library; empty when not linked
  std::string linker;       // the driver used
  std::string note;         // why there is no library (a cross target without a driver)
  std::vector<std::string> cpuFeatures;
};

/// emitObjectFile, then linkSharedLibrary when a driver exists (the object is then removed).
/// `objectPath` and `libraryPath` are the files to write. Throws kiln::Error (Io) when the target
/// is this system or another Linux system and its driver is missing (a cross target names the
/// Debian package that installs it); a target of another OS (no known driver) gets the object
/// file only, with a note.
ExportedLibrary exportLibrary(const std::vector<core::tir::PrimFunc>& funcs, const Target& target,
                              const std::string& objectPath, const std::string& libraryPath,
                              const std::string& signature);

}  // namespace kiln::codegen
