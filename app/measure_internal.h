// Helpers shared by the measurement façade files (facade_compare/profile/sweep/store.cpp).
// Not a public header.
#pragma once

#include <memory>
#include <string>

#include "app/facade.h"
#include "profiler/store.h"

namespace kiln::app {

/// Opens the store the options name, or returns nullptr when storing is disabled. Opening first
/// means a bad database fails before minutes of measuring. Throws kiln::Error.
std::unique_ptr<profiler::Store> openStoreFor(const StoreOptions& options);

/// What every measuring command needs before it measures.
struct PreparedMeasurement {
  std::unique_ptr<profiler::Store> store;  // nullptr when storing is disabled
  std::shared_ptr<const Model> model;
  std::shared_ptr<CompiledModel> compiled;
};

/// Opens the store (first, so a bad database fails before anything is compiled or measured),
/// then imports the model at `batch` (0: its own) and builds it.
Result<PreparedMeasurement> prepareMeasurement(const std::string& path, int64_t batch, const BuildOptions& build,
                                               const StoreOptions& storeOptions);

/// Files a run of `kind` for the model at `modelPath` (hashing the file) in the session the
/// options choose. Call inside a transaction. Returns the ids (buildId 0).
StoredIds beginStoredRun(profiler::Store& store, const StoreOptions& options, const std::string& modelPath,
                         const std::string& modelName, const std::string& kind,
                         const profiler::RunContext& context);

/// The host context completed with the build's facts.
profiler::RunContext runContextFor(const BuildOptions& build, int threads, const std::string& target,
                                   double compileSeconds);

/// The build's stored description.
profiler::BuildRecord buildRecordOf(const CompiledModel& compiled, int threads, int64_t batch);

/// The batch (dimension 0 of the first input) of a model; 1 when it has none.
int64_t modelBatch(const Model& model);

/// True when an error message says memory ran out (libtorch's allocator, std::bad_alloc).
bool looksOutOfMemory(const std::string& message);

}  // namespace kiln::app
