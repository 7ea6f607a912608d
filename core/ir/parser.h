// Parses the text form written by printGraph back into a Graph. Errors are kiln::Error with the
// line and column: "line 3:12: expected ')'".
#pragma once

#include <string_view>

#include "core/ir/graph.h"

namespace kiln::core {

Graph parseGraph(std::string_view text);

}  // namespace kiln::core
