#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "runtime/error.h"
#include "runtime/graph_executor.h"
#include "runtime/memory_planner.h"
#include "runtime/npy.h"
#include "runtime/thread_pool.h"

using namespace kiln;
using namespace kiln::runtime;

namespace {

std::string tempPath(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("kiln_runtime_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

void writeBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

}  // namespace

TEST(Npy, RoundTripsEveryDType) {
  for (DType d : {DType::Float32, DType::Float64, DType::Int64, DType::Int32, DType::Bool, DType::Int8, DType::UInt8}) {
    Tensor t = Tensor::zeros(d, {2, 3, 5});
    auto* bytes = static_cast<uint8_t*>(t.raw());
    for (size_t i = 0; i < t.nbytes(); ++i) bytes[i] = static_cast<uint8_t>(d == DType::Bool ? i % 2 : i * 7 + 1);
    std::string path = tempPath("rt.npy");
    writeNpy(path, t);
    Tensor back = readNpy(path);
    EXPECT_EQ(back.dtype(), d);
    EXPECT_EQ(back.shape(), t.shape());
    EXPECT_EQ(0, std::memcmp(back.raw(), t.raw(), t.nbytes())) << dtypeName(d);
  }
}

TEST(Npy, ScalarAndEmptyShapes) {
  Tensor scalar = Tensor::zeros(DType::Float32, {});
  scalar.data<float>()[0] = 2.5f;
  writeNpy(tempPath("s.npy"), scalar);
  Tensor back = readNpy(tempPath("s.npy"));
  EXPECT_TRUE(back.shape().empty());
  EXPECT_EQ(back.data<float>()[0], 2.5f);
  Tensor vec = Tensor::zeros(DType::Int64, {4});
  writeNpy(tempPath("v.npy"), vec);
  EXPECT_EQ(readNpy(tempPath("v.npy")).shape(), Shape{4});
}

TEST(Npy, RejectsMalformedFilesWithClearErrors) {
  writeBytes(tempPath("bad_magic.npy"), "hello world, not numpy");
  EXPECT_THROW(readNpy(tempPath("bad_magic.npy")), Error);
  EXPECT_THROW(readNpy(tempPath("does_not_exist.npy")), Error);

  Tensor t = Tensor::zeros(DType::Float32, {4, 4});
  writeNpy(tempPath("full.npy"), t);
  std::ifstream in(tempPath("full.npy"), std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), {});
  writeBytes(tempPath("trunc.npy"), all.substr(0, all.size() - 10));
  try {
    readNpy(tempPath("trunc.npy"));
    FAIL() << "truncated file accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
  std::string fortran = all;
  fortran.replace(fortran.find("False"), 5, "True ");
  writeBytes(tempPath("fortran.npy"), fortran);
  try {
    readNpy(tempPath("fortran.npy"));
    FAIL() << "Fortran-ordered file accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Fortran"), std::string::npos) << e.what();
  }
}

TEST(ThreadPool, CoversEveryIterationExactlyOnce) {
  for (int threads : {1, 2, 3}) {
    setNumThreads(threads);
    for (int64_t extent : {1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> hits(extent);
      auto task = [](int64_t begin, int64_t end, void* closure) -> int32_t {
        auto* h = static_cast<std::vector<std::atomic<int>>*>(closure);
        for (int64_t i = begin; i < end; ++i) (*h)[i]++;
        return 0;
      };
      EXPECT_EQ(0, parallelLaunch(task, &hits, extent));
      for (int64_t i = 0; i < extent; ++i) ASSERT_EQ(hits[i].load(), 1) << "threads=" << threads << " i=" << i;
    }
  }
  setNumThreads(0);
}

TEST(ThreadPool, PropagatesTaskErrors) {
  setNumThreads(2);
  auto task = [](int64_t begin, int64_t, void*) -> int32_t { return begin == 0 ? 0 : 7; };
  EXPECT_EQ(7, parallelLaunch(task, nullptr, 10));
  setNumThreads(0);
}

TEST(MemoryPlanner, ReusesStorageOfDeadIntermediates) {
  // A chain a → b → c → d of equal sizes needs only two blocks.
  GraphPlan plan;
  for (int i = 0; i < 4; ++i) plan.slots.push_back({"t" + std::to_string(i), DType::Float32, {256}, i == 0 ? SlotKind::Input : SlotKind::Intermediate, i == 0 ? 0 : -1});
  plan.inputs = {0};
  plan.outputs = {3};
  for (int i = 0; i < 3; ++i) plan.calls.push_back({"k", {i, i + 1}, 1, "n"});
  MemoryPlan mp = planMemory(plan);
  EXPECT_EQ(mp.blockBytes.size(), 2u);
  EXPECT_EQ(mp.unplannedBytes, 3u * 1024);
  EXPECT_EQ(mp.totalBytes(), 2u * 1024);
  // A call never writes into the block of one of its own inputs.
  for (int i = 0; i < 3; ++i) {
    if (mp.slotBlock[i] >= 0) {
      EXPECT_NE(mp.slotBlock[i], mp.slotBlock[i + 1]);
    }
  }
}

namespace {
// A tiny kernel library with hand-written kernels, so the executor is tested without codegen.
void addOne(void* const* args) {
  auto* in = static_cast<const float*>(args[0]);
  auto* out = static_cast<float*>(args[1]);
  for (int i = 0; i < 4; ++i) out[i] = in[i] + 1;
}
void addTensors(void* const* args) {
  auto* a = static_cast<const float*>(args[0]);
  auto* b = static_cast<const float*>(args[1]);
  auto* out = static_cast<float*>(args[2]);
  for (int i = 0; i < 4; ++i) out[i] = a[i] + b[i];
}
class HandLibrary : public KernelLibrary {
 public:
  KilnKernelFn lookup(const std::string& s) override {
    if (s == "add_one") return addOne;
    if (s == "add") return addTensors;
    return nullptr;
  }
};
}  // namespace

TEST(GraphExecutor, RunsCallsInOrderWithConstants) {
  GraphPlan plan;
  plan.slots = {{"x", DType::Float32, {4}, SlotKind::Input, 0},
                {"c", DType::Float32, {4}, SlotKind::Constant, 0},
                {"t", DType::Float32, {4}, SlotKind::Intermediate, -1},
                {"y", DType::Float32, {4}, SlotKind::Intermediate, -1}};
  Tensor c = Tensor::zeros(DType::Float32, {4});
  for (int i = 0; i < 4; ++i) c.data<float>()[i] = 10.0f * i;
  plan.constants = {c};
  plan.inputs = {0};
  plan.outputs = {3};
  plan.calls = {{"add_one", {0, 2}, 1, "a"}, {"add", {2, 1, 3}, 1, "b"}};
  GraphExecutor ex(plan, std::make_shared<HandLibrary>());
  Tensor x = Tensor::zeros(DType::Float32, {4});
  for (int i = 0; i < 4; ++i) x.data<float>()[i] = static_cast<float>(i);
  EXPECT_THROW(ex.run(), Error);  // input not set
  ex.setInput(0, x);
  ex.run();
  Tensor y = ex.output(0);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y.data<float>()[i], i + 1 + 10.0f * i);
}

// A call's operands are the memory its kernel reads and writes, each buffer with its size, in
// the call's argument order.
TEST(GraphExecutor, CallOperandsAreTheBuffersTheKernelIsGiven) {
  GraphPlan plan;
  plan.slots = {{"x", DType::Float32, {4}, SlotKind::Input, 0},
                {"c", DType::Float32, {4}, SlotKind::Constant, 0},
                {"t", DType::Float32, {4}, SlotKind::Intermediate, -1},
                {"y", DType::Float32, {2, 4}, SlotKind::Intermediate, -1}};
  plan.constants = {Tensor::zeros(DType::Float32, {4})};
  plan.inputs = {0};
  plan.outputs = {2};
  plan.calls = {{"add_one", {0, 2}, 1, "a"}, {"add", {2, 1, 3}, 1, "b"}};
  GraphExecutor ex(plan, std::make_shared<HandLibrary>());
  std::vector<GraphExecutor::Operand> second = ex.callOperands(1);
  ASSERT_EQ(second.size(), 3u);
  EXPECT_EQ(second[0].data, ex.callOperands(0)[1].data);  // t: written by call 0, read by call 1
  EXPECT_EQ(second[0].bytes, 16u);
  EXPECT_EQ(second[1].bytes, 16u);
  EXPECT_EQ(second[2].bytes, 32u);
  EXPECT_NE(second[1].data, second[2].data);
  EXPECT_THROW(ex.callOperands(2), Error);
  EXPECT_THROW(ex.callOperands(-1), Error);
}

TEST(GraphExecutor, RejectsWrongInputsAndMissingKernels) {
  GraphPlan plan;
  plan.slots = {{"x", DType::Float32, {4}, SlotKind::Input, 0}, {"y", DType::Float32, {4}, SlotKind::Intermediate, -1}};
  plan.inputs = {0};
  plan.outputs = {1};
  plan.calls = {{"add_one", {0, 1}, 1, "a"}};
  GraphExecutor ex(plan, std::make_shared<HandLibrary>());
  EXPECT_THROW(ex.setInput(0, Tensor::zeros(DType::Float32, {5})), Error);
  EXPECT_THROW(ex.setInput(0, Tensor::zeros(DType::Int64, {4})), Error);
  EXPECT_THROW(ex.setInput(1, Tensor::zeros(DType::Float32, {4})), Error);
  plan.calls[0].kernel = "nope";
  EXPECT_THROW(GraphExecutor(plan, std::make_shared<HandLibrary>()), Error);
}

// Blocks of 2 MiB and more are 2 MiB-aligned so that they can be backed by transparent huge pages
// (runtime/tensor.cpp; KILN_HUGEPAGES=0 turns it off); smaller ones keep 64-byte alignment.
TEST(Storage, LargeBlocksAreAlignedForHugePages) {
  const char* off = std::getenv("KILN_HUGEPAGES");
  if (off && std::strcmp(off, "0") == 0) GTEST_SKIP() << "KILN_HUGEPAGES=0";
  for (size_t bytes : {size_t{2} << 20, (size_t{4} << 20) + 12345}) {
    Storage s(bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(s.data()) % (size_t{2} << 20), 0u) << bytes << " bytes";
    EXPECT_EQ(s.bytes(), bytes);
    EXPECT_EQ(static_cast<unsigned char*>(s.data())[bytes - 1], 0);  // zero-filled to the end
  }
  Storage small(1000);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small.data()) % 64, 0u);
}
