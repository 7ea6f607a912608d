// The fuzz regression runner: feeds every file under the given folders through a fuzz target's
// entry function (the same code the libFuzzer executables run) and fails when one of them ends in
// anything but acceptance or a user-facing kiln::Error. ctest runs it on tests/fuzz/regressions
// (inputs that once crashed) and tests/fuzz/corpus (small seeds) in every build tree.
//
// Usage: test_fuzz_regress TARGET DIR...   (TARGET: graph_parser, npy, records, torchscript)
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <vector>

#include "tests/fuzz/fuzz_target.h"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  using Entry = void (*)(const uint8_t*, size_t);
  const std::map<std::string, Entry> targets = {{"graph_parser", kiln::fuzz::graphParser},
                                                {"npy", kiln::fuzz::npy},
                                                {"records", kiln::fuzz::records},
                                                {"torchscript", kiln::fuzz::torchscript}};
  if (argc < 3 || targets.count(argv[1]) == 0) {
    std::cerr << "usage: test_fuzz_regress graph_parser|npy|records|torchscript DIR...\n";
    return 2;
  }
  std::vector<fs::path> files;
  for (int i = 2; i < argc; ++i) {
    if (!fs::is_directory(argv[i])) continue;
    for (const auto& entry : fs::recursive_directory_iterator(argv[i]))
      if (entry.is_regular_file() && entry.path().filename().string()[0] != '.') files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::cerr << "test_fuzz_regress: no input files for " << argv[1] << "\n";
    return 1;
  }
  int failures = 0;
  for (const fs::path& file : files) {
    std::ifstream in(file, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::cerr << argv[1] << ": " << file.string() << " (" << bytes.size() << " bytes)" << std::endl;
    try {
      targets.at(argv[1])(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    } catch (const std::exception& e) {
      std::cerr << "FAILED: " << file.string() << ": " << e.what() << "\n";
      ++failures;
    }
  }
  std::cerr << argv[1] << ": " << files.size() << " inputs, " << failures << " failed\n";
  return failures == 0 ? 0 : 1;
}
