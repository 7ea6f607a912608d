// Input shapes given by the user: the tvmc-style text of `--input-shapes` and the Workbench's
// shapes dialog ("x:[1,3,224,224],mask:[1,128]:int64"), and how they are matched against a model's
// forward arguments. Part of the façade (no Qt); included by app/facade.h.
//
// Text form: entries separated by commas outside brackets, each `[NAME:]` `[D0,D1,...]`
// `[:DTYPE]`. Either every entry has a name or none has (then they are in forward-argument order).
// Dimensions are non-negative integers; `[]` is a scalar. DTYPE is one of float32 (default),
// float64, int64, int32, int8, uint8, bool, or their short names (f32, i64, ...) and the aliases
// float, double, long, int.
#pragma once

#include <string>
#include <vector>

#include "app/facade.h"

namespace kiln::app {

/// Parses the text form above. A malformed text is a Diagnostic of kind Usage whose message says
/// what is wrong and where ("--input-shapes: expected '[' after 'x:' in 'x:1,3'").
Result<std::vector<InputSpec>> parseInputShapes(const std::string& text);

/// The text form of specs (names when they have them; the dtype only when it is not float32), so
/// that parseInputShapes(inputShapesText(s)) == s.
std::string inputShapesText(const std::vector<InputSpec>& specs);

/// The long dtype name used by the text form ("float32", "int64", ...), and back (every name and
/// alias the text form accepts).
std::string inputDTypeName(runtime::DType dtype);
std::optional<runtime::DType> parseInputDType(const std::string& name);

/// Matches `given` to the model's forward argument `names`: named specs are put in argument order
/// (every argument must be named once, unknown names are listed with the names that exist);
/// unnamed specs take the arguments' names in order. Throws kiln::Error (InvalidInput); the
/// message does not name the file (the façade prefixes it).
std::vector<InputSpec> matchInputNames(const std::vector<InputSpec>& given, const std::vector<std::string>& names);

}  // namespace kiln::app
