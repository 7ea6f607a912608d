// Parses the text form written by printGraph back into a Graph. Errors are kiln::Error
// (InvalidModel) with the line and column: "line 3:12: expected ')'", or, given the name of the
// file the text came from, "model.kir:3:12: expected ')'" (the compiler-style form front ends
// print after "error: "). `#` starts a comment that runs to the end of the line.
#pragma once

#include <string>
#include <string_view>

#include "core/ir/graph.h"

namespace kiln::core {

Graph parseGraph(std::string_view text);
Graph parseGraph(std::string_view text, const std::string& file);

}  // namespace kiln::core
