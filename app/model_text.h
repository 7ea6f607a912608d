// Graph text (`.kir`, the form core/ir/printer.h writes) as a model source: `kiln ir FILE.kir`
// runs the passes, lowering and code generation on a graph written by hand, which is how the
// FileCheck tests in tests/filecheck/ drive the compiler. The graph's inputs are the model's
// inputs; its constants are what the text carries (an `elided` constant is zeros). Part of the
// façade (no Qt).
#pragma once

#include <memory>
#include <string>

#include "app/facade.h"

namespace kiln::app {

/// True when `path` names graph text: its extension is `.kir`.
bool isGraphTextFile(const std::string& path);

/// Reads and parses a graph text file. "-" reads standard input. Text that does not parse is an
/// InvalidModel diagnostic "FILE:LINE:COL: problem"; a file that cannot be read is Io.
Result<std::shared_ptr<const Model>> openGraphText(const std::string& path);

}  // namespace kiln::app
