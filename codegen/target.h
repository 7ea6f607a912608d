// Code-generation targets, written as LLVM-style strings:
//   "llvm"                                  the host CPU (detected), runnable in-process
//   "llvm -mcpu=NAME"                       a named CPU of the host architecture, runnable here if
//                                           this CPU supports its features
//   "llvm -mtriple=TRIPLE -mcpu=NAME"       cross-compilation (export only)
//   optional "-mattr=+avx2,+fma"            extra features
#pragma once

#include <string>

namespace kiln::codegen {

struct Target {
  std::string triple;    // normalized LLVM triple
  std::string cpu;       // resolved CPU name ("skylake-avx512"; "llvm" resolves to the host)
  std::string features;  // LLVM feature string ("+avx2,+fma,...")
  bool runnable = true;  // false for cross-compile targets (export only)

  /// Throws kiln::Error (Usage) for an unknown target string, CPU or triple.
  static Target parse(const std::string& spec);
  /// The canonical spec string ("llvm -mcpu=skylake").
  std::string str() const;
  /// str() with the CPU always named ("llvm -mcpu=znver4" where str() says "llvm" for the
  /// host): what tuning records are filed under, so they never apply to another machine's CPU.
  std::string strWithCpu() const;
};

/// The host CPU name LLVM detects ("znver3", "skylake-avx512", ...).
std::string hostCpuName();

/// The version of the LLVM that generates code ("19.1.7").
std::string llvmVersion();

}  // namespace kiln::codegen
