// Import breadth: one scripted module per op family (indexing, selection, reductions, masks,
// normalization, resampling, attention), imported and evaluated with the ATen reference
// (torch_reference.h) against libtorch running the module itself. Odd shapes on purpose.
#include <gtest/gtest.h>

#include "importer_test_util.h"
#include "torch_reference.h"
#include "runtime/error.h"

namespace kiln::importers {
namespace {

std::string specOf(const std::vector<std::pair<std::string, std::string>>& inputs) {
  std::string json = R"({"inputs": [)";
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto& [shape, dtype] = inputs[i];
    json += (i ? ", " : "") + std::string(R"({"name": "x)") + std::to_string(i) + R"(", "shape": )" + shape +
            R"(, "dtype": ")" + dtype + R"("})";
  }
  return json + "]}";
}

/// Imports `forward` (over inputs x0, x1, ...) and checks it against libtorch.
ImportedModel check(const std::string& name, const std::string& forward,
                    const std::vector<std::pair<std::string, std::string>>& inputs,
                    const std::vector<std::pair<std::string, at::Tensor>>& buffers = {}) {
  std::string path = testing::saveScriptedModule(name, forward, specOf(inputs), buffers);
  ImportedModel model = importTorchScript(path);
  testing::expectMatchesLibtorch(path, model);
  return model;
}

const std::string f32 = "float32";

TEST(ImportBreadth, SlicingWithStepsSelectNarrow) {
  auto m = check("Slicing",
                 "def forward(self, x0):\n"
                 "  a = x0[:, 1:6:2, ::3]\n"
                 "  b = x0[-1, :, 2]\n"
                 "  c = x0.narrow(2, 1, 4)[..., -2:]\n"
                 "  return a, b, c, x0.select(1, -1)\n",
                 {{"[3, 7, 9]", f32}});
  EXPECT_GT(testing::opHistogram(m.graph)["strided_slice"], 3);
}

TEST(ImportBreadth, ChunkSplitUnbind) {
  check("Chunks",
        "def forward(self, x0):\n"
        "  a, b, c = x0.chunk(3, dim=-1)\n"
        "  d, e = torch.split(x0, [2, 3], dim=1)\n"
        "  f = torch.split(x0, 4, dim=2)\n"
        "  u = x0.unbind(0)\n"
        "  return a + 1.0, b, c * 2.0, d, e, f[1], f[2], u[1]\n",
        {{"[2, 5, 10]", f32}});
}

TEST(ImportBreadth, EmbeddingIndexSelectAndIndex) {
  auto m = check("Gathers",
                 "def forward(self, x0, x1):\n"
                 "  i = x1.abs()\n"
                 "  e = torch.embedding(self.w, i)\n"
                 "  s = torch.index_select(x0, 1, i[0])\n"
                 "  t = x0[:, i[1]]\n"
                 "  return e, s, t, x0[i[0]]\n",
                 {{"[6, 7]", f32}, {"[2, 5]", "int64"}}, {{"w", torch::randn({9, 4})}});
  EXPECT_EQ(testing::opHistogram(m.graph)["take"], 4);
}

TEST(ImportBreadth, ExpandRepeatMaskedFillWhere) {
  check("Masks",
        "def forward(self, x0, x1):\n"
        "  e = x1.expand(3, 4, 5) + x0\n"
        "  r = x1.repeat(2, 1, 3)\n"
        "  m = x0.masked_fill(x0 > 0.5, -1.0)\n"
        "  w = torch.where(x0 < x1, x0, x1 * 2.0)\n"
        "  k = ((x0 >= 0.0) & ~(x1 != x1)).float()\n"
        "  return e, r, m, w, k, (x0 == x0).to(x0.dtype)\n",
        {{"[3, 4, 5]", f32}, {"[4, 1]", f32}});
}

TEST(ImportBreadth, RollAlongAxesAndFlattened) {  // Swin's shifted windows
  auto m = check("Roll",
                 "def forward(self, x0):\n"
                 "  a = torch.roll(x0, shifts=(-3, 3), dims=(1, 2))\n"
                 "  b = torch.roll(x0, 2, 0)\n"
                 "  c = torch.roll(x0, 11)\n"
                 "  d = torch.roll(x0, shifts=(7, 0), dims=(-1, 1))\n"
                 "  return a, b, c, d\n",
                 {{"[2, 5, 6]", f32}});
  EXPECT_EQ(testing::opHistogram(m.graph)["concat"], 4);  // b is a full turn and d rolls one axis by 0: no-ops
}

TEST(ImportBreadth, CastsAndIntegerPromotion) {
  check("Casts",
        "def forward(self, x0, x1):\n"
        "  a = (x0 * 3.0).long()\n"
        "  b = x1 / 2\n"
        "  c = x1.float() + x0\n"
        "  return a, b, c, (x0 > 0).int()\n",
        {{"[7]", f32}, {"[7]", "int64"}});
}

TEST(ImportBreadth, SelectingReductionsAndTopk) {
  auto m = check("Reductions",
                 "def forward(self, x0):\n"
                 "  v, i = torch.max(x0, 1)\n"
                 "  w, j = x0.min(dim=-1, keepdim=True)\n"
                 "  a = torch.amax(x0, [0, 2])\n"
                 "  t, k = torch.topk(x0, 3, dim=1)\n"
                 "  s, o = torch.sort(x0, dim=2, descending=True)\n"
                 "  return v, i, w, j, a, x0.argmax(), x0.argmin(2), t, k, s, o, torch.max(x0), torch.max(x0, x0 * 0.5)\n",
                 {{"[3, 7, 5]", f32}});
  EXPECT_EQ(testing::opHistogram(m.graph)["topk"], 2);
}

TEST(ImportBreadth, LogSoftmaxOnAnyAxis) {
  check("LogSoftmax",
        "def forward(self, x0):\n"
        "  return torch.log_softmax(x0, 0), torch.log_softmax(x0 * 3.0, dim=1), torch.softmax(x0, -2)\n",
        {{"[3, 7, 5]", f32}});
}

TEST(ImportBreadth, GroupAndInstanceNorm) {
  check("Norms",
        "def forward(self, x0):\n"
        "  g = torch.group_norm(x0, 3, self.w, self.b, 1e-5)\n"
        "  i = torch.instance_norm(x0, self.w, self.b, None, None, True, 0.1, 1e-5, False)\n"
        "  return g, i, torch.group_norm(x0, 1)\n",
        {{"[2, 6, 5, 3]", f32}}, {{"w", torch::randn({6})}, {"b", torch::randn({6})}});
}

TEST(ImportBreadth, TransposedConvolutionUpsamplePixelShuffle) {
  check("Image",
        "def forward(self, x0):\n"
        "  t = torch.conv_transpose2d(x0, self.w, self.b, [2, 1], [1, 0], [1, 0], 2, [1, 2])\n"
        "  n = torch.upsample_nearest2d(x0, None, [2.0, 2.0])\n"
        "  m = torch.upsample_nearest2d(x0, [7, 4], None)\n"
        "  b = torch.upsample_bilinear2d(x0, [9, 11], False, None)\n"
        "  a = torch.upsample_bilinear2d(x0, None, True, [1.5, 1.5])\n"
        "  return t, n, m, b, a, torch.pixel_shuffle(x0, 2), torch.pixel_unshuffle(x0[:, :, :4, :6], 2)\n",
        {{"[1, 4, 5, 7]", f32}}, {{"w", torch::randn({4, 3, 3, 2})}, {"b", torch::randn({6})}});
}

TEST(ImportBreadth, ActivationsFromExistingOps) {
  check("Activations",
        "def forward(self, x0):\n"
        "  f = torch\n"
        "  return f.elu(x0), torch.elu(x0, 0.5, 1.5, 2.0), torch.selu(x0), torch.celu(x0, 0.7), f.softplus(x0 * 10.0), f.mish(x0), torch.square(x0), "
        "f.glu(x0, 1), torch.reciprocal(x0.abs() + 1.0)\n",
        {{"[3, 4]", f32}});
}

TEST(ImportBreadth, BaddbmmAndBroadcastMatmul) {
  check("Matmuls",
        "def forward(self, x0, x1):\n"
        "  a = torch.baddbmm(x0[:, :, :3], x0, x1, beta=0.5, alpha=2.0)\n"
        "  return a, torch.matmul(x0, x1[0]), torch.matmul(x0.unsqueeze(0), x1), torch.matmul(x1[0, :, 0], x1[1])\n",
        {{"[2, 3, 5]", f32}, {"[2, 5, 3]", f32}});
}

TEST(ImportBreadth, ShapeArithmeticIsFoldedAtImport) {
  auto m = check("ShapeMath",
                 "def forward(self, x0):\n"
                 "  b, n, d = x0.size()\n"
                 "  h = 2\n"
                 "  y = x0.view(b, n, h, d // h).transpose(1, 2)\n"
                 "  s = torch.matmul(y, y.transpose(-2, -1)) / float(d // h) ** 0.5\n"
                 "  return s.softmax(-1).reshape(b * h, n, n)\n",
                 {{"[2, 3, 6]", f32}});
  for (const core::Node& n : m.graph.nodes()) EXPECT_NE(n.op, "cast") << "shape arithmetic reached the graph";
}

TEST(ImportBreadth, PadInEveryModeAndOnAnyTrailingAxes) {
  auto m = check("Pads",
                 "def forward(self, x0, x1):\n"
                 "  a = torch.pad(x1, [1, 2], 'reflect')\n"
                 "  b = torch.pad(x0, [2, 1, 3, 0], 'reflect')\n"
                 "  c = torch.pad(x0, [1, 3, 2, 2], 'replicate')\n"
                 "  d = torch.pad(x0, [2, 1, 1, 3], 'circular')\n"
                 "  e = torch.pad(x0, [1, 2, 0, 1, 2, 0, 1, 1], 'constant', 0.5)\n"
                 "  f = torch.pad(x0, [-1, 2, 1, -2])\n"
                 "  g = torch.pad(x0, [1, -2, -1, 2], 'reflect')\n"
                 "  return a, b, c, d, e, f, g\n",
                 {{"[2, 3, 5, 7]", f32}, {"[2, 4, 6]", f32}});
  EXPECT_EQ(testing::opHistogram(m.graph)["pad"], 7);
}

TEST(ImportBreadth, PaddingKernelsByName) {
  auto m = check("PadKernels",
                 "def forward(self, x0, x1):\n"
                 "  a = torch.constant_pad_nd(x0, [1, 1, 2, 0], -1.5)\n"
                 "  b = torch.reflection_pad1d(x1, [2, 3])\n"
                 "  c = torch.reflection_pad2d(x0, [1, 2, 3, 1])\n"
                 "  d = torch.replication_pad1d(x1, [4, 1])\n"
                 "  e = torch.replication_pad2d(x0, [0, 5, 2, 2])\n"
                 "  f = torch.replication_pad3d(x0, [1, 1, 1, 2, 2, 1])\n"
                 "  g = torch._pad_circular(x1, [3, 2])\n"
                 "  h = torch.pad(x1, [0, 0])\n"
                 "  return a, b, c, d, e, f, g, h + 1.0\n",
                 {{"[2, 3, 5, 7]", f32}, {"[2, 4, 6]", f32}});
  EXPECT_EQ(testing::opHistogram(m.graph)["pad"], 7);  // a zero pad is no node
}

TEST(ImportBreadth, ConvolutionPaddingSameAndValid) {
  // padding="same" with even kernels and dilation needs more padding on the right/bottom: a pad
  // node before the convolution; odd kernels stay symmetric (conv2d's own padding).
  auto m = check("ConvSame",
                 "def forward(self, x0, x1):\n"
                 "  a = torch._convolution_mode(x0, self.w4, self.b, [1, 1], 'same', [1, 1], 1)\n"
                 "  b = torch._convolution_mode(x0, self.w3, None, [1, 1], 'same', [2, 1], 1)\n"
                 "  c = torch._convolution_mode(x0, self.w4, self.b, [2, 1], 'valid', [1, 2], 1)\n"
                 "  d = torch.conv2d(x0, self.w2, None, [1, 1], 'same', [3, 1], 1)\n"
                 "  e = torch._convolution_mode(x1, self.v, None, [1], 'same', [1], 1)\n"
                 "  f = torch.conv1d(x1, self.v, None, [1], 'same', [3], 1)\n"
                 "  return a, b, c, d, e, f\n",
                 {{"[1, 3, 9, 8]", f32}, {"[2, 3, 11]", f32}},
                 {{"w4", torch::randn({5, 3, 4, 4})}, {"w3", torch::randn({5, 3, 3, 3})},
                  {"w2", torch::randn({4, 3, 2, 3})}, {"b", torch::randn({5})}, {"v", torch::randn({4, 3, 4})}});
  // Even kernels (a, d, e, f) get a pad node; dilation 2 of a 3×3 kernel is symmetric (b).
  EXPECT_EQ(testing::opHistogram(m.graph)["pad"], 4);
  EXPECT_EQ(testing::opHistogram(m.graph)["conv2d"], 6);
}

/// nn.LSTM/nn.GRU-shaped weights: per layer and direction w_ih [G·H, in], w_hh [G·H, H], b_ih, b_hh.
std::vector<std::pair<std::string, at::Tensor>> recurrentWeights(int64_t gates, int64_t input, int64_t hidden,
                                                                 int64_t layers, int64_t dirs, bool biases) {
  std::vector<std::pair<std::string, at::Tensor>> w;
  for (int64_t l = 0; l < layers; ++l) {
    for (int64_t d = 0; d < dirs; ++d) {
      std::string k = std::to_string(l * dirs + d);
      w.emplace_back("wi" + k, torch::randn({gates * hidden, l == 0 ? input : dirs * hidden}) * 0.4);
      w.emplace_back("wh" + k, torch::randn({gates * hidden, hidden}) * 0.4);
      if (biases) {
        w.emplace_back("bi" + k, torch::randn({gates * hidden}) * 0.3);
        w.emplace_back("bh" + k, torch::randn({gates * hidden}) * 0.3);
      }
    }
  }
  return w;
}

std::string weightList(const std::vector<std::pair<std::string, at::Tensor>>& w) {
  std::string list = "[";
  for (size_t i = 0; i < w.size(); ++i) list += (i ? ", self." : "self.") + w[i].first;
  return list + "]";
}

TEST(ImportBreadth, LstmSingleMultiLayerBidirectionalBatchFirst) {
  // x0 [T=5, B=2, I=3] time-major; x1 [B=2, T=4, I=3] batch-first; h/c initial states given or zeros.
  auto one = recurrentWeights(4, 3, 6, 1, 1, true);
  auto deep = recurrentWeights(4, 3, 5, 2, 2, true);
  auto noBias = recurrentWeights(4, 3, 4, 2, 1, false);
  std::vector<std::pair<std::string, at::Tensor>> buffers;
  auto prefixed = [&](const std::string& p, const std::vector<std::pair<std::string, at::Tensor>>& w) {
    std::vector<std::pair<std::string, at::Tensor>> out;
    for (const auto& [name, t] : w) out.emplace_back(p + name, t);
    buffers.insert(buffers.end(), out.begin(), out.end());
    return weightList(out);
  };
  std::string wOne = prefixed("a", one), wDeep = prefixed("b", deep), wNoBias = prefixed("c", noBias);
  buffers.emplace_back("h0", torch::randn({4, 2, 5}));
  buffers.emplace_back("c0", torch::randn({4, 2, 5}));
  auto m = check("Lstm",
                 "def forward(self, x0, x1):\n"
                 "  z = torch.zeros(1, 2, 6)\n"
                 "  a, ha, ca = torch.lstm(x0, [z, z], " + wOne + ", True, 1, 0.0, False, False, False)\n"
                 "  b, hb, cb = torch.lstm(x1, [self.h0, self.c0], " + wDeep + ", True, 2, 0.0, False, True, True)\n"
                 "  zc = torch.zeros(2, 2, 4)\n"
                 "  c, hc, cc = torch.lstm(x0.transpose(0, 1), [zc, zc], " + wNoBias +
                     ", False, 2, 0.0, False, False, True)\n"
                 "  return a, ha, ca, b, hb, cb, c, hc, cc\n",
                 {{"[5, 2, 3]", f32}, {"[2, 4, 3]", f32}}, buffers);
  EXPECT_GT(testing::opHistogram(m.graph)["dense"], 20);
}

TEST(ImportBreadth, GruSingleMultiLayerBidirectionalBatchFirst) {
  auto one = recurrentWeights(3, 3, 6, 1, 1, true);
  auto deep = recurrentWeights(3, 3, 5, 2, 2, true);
  std::vector<std::pair<std::string, at::Tensor>> buffers;
  std::string wOne, wDeep;
  for (auto [list, w, p] : {std::tuple{&wOne, &one, "a"}, std::tuple{&wDeep, &deep, "b"}}) {
    std::vector<std::pair<std::string, at::Tensor>> named;
    for (const auto& [name, t] : *w) named.emplace_back(p + name, t);
    buffers.insert(buffers.end(), named.begin(), named.end());
    *list = weightList(named);
  }
  buffers.emplace_back("h0", torch::randn({4, 2, 5}));
  check("Gru",
        "def forward(self, x0, x1):\n"
        "  a, ha = torch.gru(x0, torch.zeros(1, 2, 6), " + wOne + ", True, 1, 0.0, False, False, False)\n"
        "  b, hb = torch.gru(x1, self.h0, " + wDeep + ", True, 2, 0.0, False, True, True)\n"
        "  return a, ha, b, hb\n",
        {{"[5, 2, 3]", f32}, {"[2, 4, 3]", f32}}, buffers);
}

TEST(ImportBreadth, BooleanMaskIndexingIsRejectedByName) {
  std::string path = testing::saveScriptedModule("BoolIndex", "def forward(self, x0):\n  return x0[x0 > 0]\n",
                                                 specOf({{"[5]", f32}}));
  try {
    importTorchScript(path);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("aten::index"), std::string::npos) << e.what();
  }
}

// --- in-place writes through views, einsum (Swin, MaxViT) -----------------------------------

/// The import's error, or "" when it imports.
std::pair<ErrorKind, std::string> importError(const std::string& name, const std::string& forward,
                                              const std::vector<std::pair<std::string, std::string>>& inputs) {
  std::string path = testing::saveScriptedModule(name, forward, specOf(inputs));
  try {
    importTorchScript(path);
  } catch (const Error& e) {
    return {e.kind(), e.what()};
  }
  return {ErrorKind::Internal, ""};
}

TEST(ImportBreadth, ViewWritesIntoConstantsFoldAtImport) {  // Swin's attention mask and v2's qkv bias
  auto m = check("ViewWritesConstant",
                 "def forward(self, x0):\n"
                 "  m = x0.new_zeros([6, 8])\n"
                 "  m[0:-2, 0:-3] = 1.0\n"
                 "  m[-2:, -3:] = 2.0\n"
                 "  m[1, 2:5] = 3.0\n"
                 "  m[3:5, 1:3].copy_(torch.ones(2, 2) * 4.0)\n"
                 "  b = self.w.clone()\n"
                 "  b[2:4].zero_()\n"
                 "  b[::2].fill_(-1.0)\n"
                 "  return x0 + m, x0[0] * b, self.w + 0.0\n",
                 {{"[6, 8]", f32}}, {{"w", torch::randn({8})}});
  auto ops = testing::opHistogram(m.graph);
  EXPECT_EQ(ops["where"], 0);  // every write folded into a constant
  EXPECT_EQ(ops["pad"], 0);
}

TEST(ImportBreadth, ViewWritesIntoComputedTensors) {
  auto m = check("ViewWritesGraph",
                 "def forward(self, x0, x1, x2):\n"
                 "  y = x0 * 2.0\n"
                 "  y[:, 1:3] = x1\n"
                 "  y[0, 2:] = 0.5\n"
                 "  y[2:, 0].zero_()\n"
                 "  y[1:3, 3:5].mul_(3.0)\n"
                 "  y[3, -2:].copy_(x2)\n"
                 "  z = x0.new_zeros([4, 6])\n"
                 "  z[1:, 2:4] = x1[1:]\n"
                 "  return y, y.sum(1), z, torch.einsum('ij,kj->ik', [y, x0])\n",
                 {{"[4, 6]", f32}, {"[4, 2]", f32}, {"[1]", f32}});
  EXPECT_EQ(testing::opHistogram(m.graph)["where"], 6);  // one per write into a computed tensor
}

TEST(ImportBreadth, SliceAndSelectScatter) {  // torch.export's form of writes through views
  auto m = check("Scatters",
                 "def forward(self, x0, x1, x2):\n"
                 "  a = torch.slice_scatter(x0, x1, 1, 1, 3)\n"
                 "  b = torch.slice_scatter(x0, x1 * 2.0, 1, -2)\n"
                 "  c = torch.select_scatter(x0, x2, 0, -1)\n"
                 "  return a, b, c\n",
                 {{"[4, 6, 2]", f32}, {"[4, 2, 2]", f32}, {"[6, 2]", f32}});
  EXPECT_EQ(testing::opHistogram(m.graph)["where"], 3);
}

TEST(ImportBreadth, ViewWritesThatCannotBeMadeFunctionalAreRefused) {
  struct Case {
    const char* name;
    const char* source;
    const char* says;
  };
  const Case cases[] = {
      // A view taken before the write and read after it would see the old value.
      {"StaleView",
       "def forward(self, x0):\n  y = x0 * 1.0\n  v = y[0]\n  y[0, 1:3] = 0.0\n  return v + 1.0\n",
       "read later through another alias"},
      // A view of a model input is the input's storage too.
      {"InputReshaped", "def forward(self, x0):\n  y = x0.view(4, 3)\n  y[1:2] = 0.0\n  return y\n",
       "model input %x0"},
      {"InputView", "def forward(self, x0):\n  x0[0:2] = 0.0\n  return x0 + 1.0\n", "model input %x0"},
      {"StridedView", "def forward(self, x0):\n  y = x0 * 1.0\n  y[::2] = 0.0\n  return y\n", "strided slice"},
  };
  for (const Case& c : cases) {
    auto [kind, what] = importError(c.name, c.source, {{"[3, 4]", f32}});
    EXPECT_EQ(kind, ErrorKind::Unsupported) << c.name;
    EXPECT_NE(what.find(c.says), std::string::npos) << c.name << ": " << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << c.name << ": " << what;
  }
}

TEST(ImportBreadth, VectorNorms) {  // F.normalize in Swin v2's cosine attention
  check("VectorNorms",              // a name of its own: ctest runs tests in parallel, each saving NAME.pt
        "def forward(self, x0):\n"
        "  a = x0 / torch.linalg_vector_norm(x0, 2.0, [-1], True).clamp_min(1e-12).expand_as(x0)\n"
        "  b = torch.linalg_vector_norm(x0, 3.0, [0, 2], True)\n"
        "  c = torch.linalg_vector_norm(x0, float('inf'), [1])\n"
        "  d = torch.linalg_vector_norm(x0, -float('inf'), [2])\n"
        "  e = torch.linalg_vector_norm(x0, 1.0)\n"
        "  return a, b, c, d, e, x0.norm(2.0, [1], True), x0.norm(2.0)\n",
        {{"[2, 3, 5]", f32}});
}

TEST(ImportBreadth, EinsumAsTransposeReshapeMatmulSum) {
  auto m = check("Einsum",
                 "def forward(self, x0, x1, x2, x3, x4, x5):\n"
                 "  a = torch.einsum('bij,bjk->bik', [x0, x1])\n"
                 "  b = torch.einsum('b h w c, h k c -> b h w k', [x2, x3])\n"
                 "  c = torch.einsum('...ij,...kj', [x0, x0])\n"
                 "  d = torch.einsum('...ij,...jk->...ik', [x4, x5])\n"
                 "  e = torch.einsum('ij->', [x0[0]])\n"
                 "  f = torch.einsum('i,j->ij', [x0[0, 0], x1[1, :, 2]])\n"
                 "  g = torch.einsum('bij->jbi', [x0])\n"
                 "  h = torch.einsum('ij,jk,kl->il', [x0[0], x1[0], x2[0, 0]])\n"
                 "  q = torch.einsum('B G H I D, B G H J D -> B G H I J', [x0.view(1, 2, 1, 3, 4), x0.view(1, 2, 1, 3, 4)])\n"
                 "  r = torch.einsum('bij,bkj->b', [x0, x0])\n"
                 "  s = torch.einsum('bij', [x0])\n"
                 "  return a, b, c, d, e, f, g, h, q, r, s, x0.swapaxes(0, 2), torch.swapdims(x0, -1, 1)\n",
                 {{"[2, 3, 4]", f32}, {"[2, 4, 5]", f32}, {"[2, 3, 5, 6]", f32}, {"[3, 7, 6]", f32},
                  {"[2, 1, 3, 4]", f32}, {"[5, 4, 6]", f32}});
  auto ops = testing::opHistogram(m.graph);
  EXPECT_GE(ops["matmul"], 7);
  EXPECT_EQ(ops.count("einsum"), 0u);
}

TEST(ImportBreadth, EinsumDiagonalsAndBadEquationsAreOneLine) {
  auto [kind, what] = importError("EinsumDiagonal", "def forward(self, x0):\n  return torch.einsum('ii->i', [x0])\n",
                                  {{"[3, 3]", f32}});
  EXPECT_EQ(kind, ErrorKind::Unsupported);
  EXPECT_NE(what.find("aten::einsum"), std::string::npos) << what;
  EXPECT_NE(what.find("index 'i' repeats within operand 0"), std::string::npos) << what;
  std::tie(kind, what) = importError("EinsumRank", "def forward(self, x0):\n  return torch.einsum('ijk->i', [x0])\n",
                                     {{"[3, 3]", f32}});
  EXPECT_EQ(kind, ErrorKind::InvalidModel);
  EXPECT_NE(what.find("operand 0 has rank 2"), std::string::npos) << what;
}

TEST(ImportBreadth, RemainderTakesTheDivisorsSign) {
  // Floats of both signs by positive and negative divisors, and integers (a zero divisor is left
  // out: PyTorch raises there).
  auto m = check("Remainder",
                 "def forward(self, x0, x1):\n"
                 "  a = torch.remainder(x0 * 5.0, 1.5)\n"
                 "  b = torch.remainder(x0 * 5.0, -1.25)\n"
                 "  c = torch.remainder(x0 * 4.0, x1 + 3.0)\n"
                 "  n = (x0 * 9.0).long()\n"
                 "  return a, b, c, torch.remainder(n, 4), torch.remainder(n, -3), n % 5\n",
                 {{"[3, 7]", f32}, {"[3, 7]", f32}});
  EXPECT_GE(testing::opHistogram(m.graph)["remainder"], 6);
}

// --- the import doctor's survey --------------------------------------------------------------

TEST(ImportSurvey, ContinuesPastUnsupportedNodesAndFlagsControlFlow) {
  std::string path = testing::saveScriptedModule("Survey",
                                                 "def forward(self, x0):\n"
                                                 "  y = torch.relu(x0)\n"
                                                 "  if bool(y.sum() > 0):\n"
                                                 "    y = y * 2.0\n"
                                                 "  z = torch.cumsum(y, 1)\n"
                                                 "  return torch.sigmoid(z).view(-1)\n",
                                                 specOf({{"[2, 3]", f32}}));
  SurveyResult survey = surveyTorchScript(path);
  EXPECT_TRUE(survey.controlFlow);
  EXPECT_TRUE(survey.complete);
  std::map<std::string, OpStatus> status;
  for (const SurveyedOp& op : survey.ops) status[op.kind] = op.status;
  EXPECT_EQ(status["aten::relu"], OpStatus::Supported);
  // bool(tensor) stays a rank-0 tensor, and the branch on it an `if` node with both branches.
  EXPECT_EQ(status["aten::Bool"], OpStatus::Supported);
  EXPECT_EQ(status["prim::If"], OpStatus::Supported);
  EXPECT_EQ(status["aten::cumsum"], OpStatus::Unsupported);
  EXPECT_EQ(status["aten::sigmoid"], OpStatus::Supported);  // after both: stand-ins kept it going
}

}  // namespace
}  // namespace kiln::importers
