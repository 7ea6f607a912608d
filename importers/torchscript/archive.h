// Reading a TorchScript archive, and checking it before libtorch sees it.
//
// libtorch 1.13 trusts what a model file says: a memo index or length in a pickle, a tensor's
// element count against its storage record, the stack height an opcode needs, the indices of a
// source map (code/**.debug_pkl), a class body in code/**.py. A corrupt file then crashes it or
// makes it allocate gigabytes (the fuzzer's findings, tests/fuzz/README.md). The file is read
// into memory once; the checks and libtorch's load see the same bytes. A corrupt file is refused
// with one line (ErrorKind::InvalidModel); a corrupt source map only costs the Python source
// locations (it is hidden from libtorch, whose nodes then point at the archive's serialized code).
#pragma once

#include <exception>
#include <memory>
#include <cstdint>
#include <string>
#include <unordered_map>

#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/serialization/import.h>

namespace kiln::importers::ts {

/// Loads the archive at `path` after the checks above (kiln::Error on a bad file, Io or
/// InvalidModel); its tensors are checked against their storages too. `extra` as torch::jit::load.
torch::jit::Module loadArchive(const std::string& path, torch::jit::ExtraFilesMap& extra);

/// Why the file at `path` is not a TorchScript archive in the user's terms ("a pickle from
/// torch.save; ...", "not a zip file"), empty when it looks like one.
std::string fileKindProblem(const std::string& path);

/// The uncompressed size of every record of a zip archive in memory (names inside its folder, as
/// PyTorchStreamReader lists them), from its central directory: what libtorch's reader allocates
/// when it reads one. Sizes past 4 GiB are left out; empty when the directory cannot be walked.
std::unordered_map<std::string, uint64_t> zipRecordSizes(const std::string& zip);

/// The whole file at `path`, read into memory once (kiln::Error Io when missing or unreadable).
std::shared_ptr<std::string> readFileBytes(const std::string& path);

/// libtorch's zip reader over an archive held in memory (the bytes are shared, not copied).
std::unique_ptr<caffe2::serialize::PyTorchStreamReader> openZipInMemory(std::shared_ptr<const std::string> bytes);

/// The first line of a libtorch exception's message, without its backtrace.
std::string torchMessage(const std::exception& e);
/// The first non-blank line of `text`, without trailing blanks and period.
std::string firstLine(const std::string& text);
/// Throws kiln::Error (Io) when `path` is missing or not a regular file.
void requireFile(const std::string& path);

}  // namespace kiln::importers::ts
