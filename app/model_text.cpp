#include "app/model_text.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "app/facade_internal.h"
#include "core/ir/parser.h"

namespace kiln::app {

bool isGraphTextFile(const std::string& path) { return std::filesystem::path(path).extension() == ".kir"; }

Result<std::shared_ptr<const Model>> openGraphText(const std::string& path) {
  // Parse errors name the file themselves (FILE:LINE:COL), so nothing is prefixed here.
  return guarded<std::shared_ptr<const Model>>("", [&] {
    auto start = std::chrono::steady_clock::now();
    std::string text;
    if (path == "-") {
      std::ostringstream ss;
      ss << std::cin.rdbuf();
      text = ss.str();
    } else {
      if (std::filesystem::is_directory(path)) throw Error(path + ": is a directory", ErrorKind::Io);
      std::ifstream in(path, std::ios::binary);
      if (!in) throw Error(path + ": no such file or not readable", ErrorKind::Io);
      text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      if (in.bad()) throw Error(path + ": cannot be read", ErrorKind::Io);
    }
    std::string name = path == "-" ? "<stdin>" : path;
    auto model = std::make_shared<Model>();
    model->graph = core::parseGraph(text, name);
    model->path = path;
    model->source = name;
    model->name = path == "-" ? "stdin" : std::filesystem::path(path).stem().string();
    for (core::ValueId v : model->graph.inputs()) {
      const core::Value& value = model->graph.value(v);
      model->inputs.push_back(InputSpec{value.name, value.type.dtype, value.type.shape});
    }
    model->importSeconds = secondsSince(start);
    return std::shared_ptr<const Model>(std::move(model));
  });
}

}  // namespace kiln::app
