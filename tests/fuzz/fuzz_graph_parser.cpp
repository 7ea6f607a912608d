// Fuzz target: the graph-IR text parser (core/ir/parser.h). Text that parses must also print and
// parse back to the same text (the printer/parser round trip that the IR promises).
#include "core/ir/parser.h"
#include "core/ir/printer.h"
#include "tests/fuzz/fuzz_target.h"

namespace kiln::fuzz {

void graphParser(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  expectOnlyUserErrors("graph_parser", [&] {
    core::Graph graph = core::parseGraph(text);
    int64_t constantElements = 0;
    for (const core::Value& v : graph.values())
      if (v.isConstant()) constantElements += v.constant->numel();
    if (constantElements > (1 << 16)) return;  // printing every element would only be slow
    core::PrintOptions full;
    full.fullConstants = true;
    std::string printed = core::printGraph(graph, full);
    std::string reprinted;
    try {
      reprinted = core::printGraph(core::parseGraph(printed), full);
    } catch (const Error& e) {
      throw FuzzFailure("graph_parser: printed graph does not parse back: " + std::string(e.what()) + "\n" + printed);
    }
    if (reprinted != printed)
      throw FuzzFailure("graph_parser: print(parse(print(g))) differs from print(g):\n" + printed + "\n---\n" + reprinted);
  });
}

}  // namespace kiln::fuzz

KILN_FUZZ_ENTRY(kiln::fuzz::graphParser)
