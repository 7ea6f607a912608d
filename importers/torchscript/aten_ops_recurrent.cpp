// Recurrent layers: aten::lstm, aten::gru, aten::rnn_tanh and aten::rnn_relu (the unpacked `input`
// overloads nn.LSTM / nn.GRU / nn.RNN trace to) as canonical operators, unrolled over the static sequence length, as TVM's PyTorch
// frontend does. Per layer and direction:
//
//   xp = dense(x, W_ih, b_ih)                  one GEMM over every time step (hoisted)
//   for t (backwards for the reverse direction):
//     g  = dense(h, W_hh, b_hh) + xp[t]        the recurrent GEMM with the input term as its
//                                              epilogue (LSTM; fused at -O2)
//     LSTM: i, f, c~, o = σ(g0), σ(g1), tanh(g2), σ(g3);  c = f·c + i·c~;  h = o·tanh(c)
//     GRU:  r, z = σ(xp_r + hh_r), σ(xp_z + hh_z);  n = tanh(xp_n + r·hh_n);  h = n + z·(h − n)
//     RNN:  h = tanh(g) or relu(g)             (nn.RNN's nonlinearity; one gate)
//
// Multi-layer stacks feed each layer's output (both directions concatenated) to the next;
// batch_first transposes in and out; missing initial states are the zeros PyTorch uses (traced
// as constants). Dropout between layers is inactive in eval mode. Projections (proj_size) and
// packed sequences are refused by name.
#include <ATen/ATen.h>

#include "importers/torchscript/aten_helpers.h"
#include "importers/torchscript/context.h"

namespace kiln::importers::ts {
namespace {

enum class Cell { Lstm, Gru, RnnTanh, RnnRelu };

int64_t gatesOf(Cell cell) { return cell == Cell::Lstm ? 4 : cell == Cell::Gru ? 3 : 1; }

struct Recurrent {
  Ctx& c;
  N n;
  Cell cell;
  int64_t hidden = 0;

  /// x[begin:end] along `axis` (every other axis whole).
  ValueId slice(ValueId x, int64_t axis, int64_t begin, int64_t end, const std::string& stem) {
    const Shape s = c.type(x).shape;
    std::vector<int64_t> b(s.size(), 0), e = s, st(s.size(), 1);
    b[axis] = begin;
    e[axis] = end;
    return c.emit(n, "strided_slice", {x}, {{"begin", b}, {"end", e}, {"strides", st}}, stem);
  }
  /// Gate k ([B, gates·H] → [B, H]).
  ValueId gate(ValueId g, int64_t k, const std::string& stem) { return slice(g, 1, k * hidden, (k + 1) * hidden, stem); }
  ValueId op(const std::string& name, std::vector<ValueId> in, const std::string& stem) {
    return c.emit(n, name, std::move(in), {}, stem);
  }

  /// One direction of one layer over x [T, B, I]: the outputs [T, B, H] and the final states.
  ValueId run(ValueId x, const std::vector<ValueId>& w, ValueId& h, ValueId& cs, bool reverse) {
    const Shape xs = c.type(x).shape;
    int64_t steps = xs[0], batch = xs[1];
    std::vector<ValueId> inProj{x, w[0]}, hidProj{w[1]};
    if (w.size() == 4) {
      inProj.push_back(w[2]);
      hidProj.push_back(w[3]);
    }
    // [T·B, G·H]: step t is rows [t·B, (t + 1)·B), a plain slice of a value computed outside the
    // step, which fuse-ops lets join the recurrent dense's epilogue.
    ValueId xp = c.emit(n, "dense", inProj, {}, "rnn_input_proj");
    xp = reshapeTo(c, n, xp, {steps * batch, c.type(xp).shape[2]}, "rnn_input_rows");
    std::vector<ValueId> outs(static_cast<size_t>(steps));
    for (int64_t k = 0; k < steps; ++k) {
      int64_t t = reverse ? steps - 1 - k : k;
      ValueId xt = slice(xp, 0, t * batch, (t + 1) * batch, "rnn_step_in");
      std::vector<ValueId> hp{h};
      hp.insert(hp.end(), hidProj.begin(), hidProj.end());
      ValueId hh = c.emit(n, "dense", hp, {}, "rnn_hidden_proj");
      if (cell == Cell::Lstm) {
        ValueId g = op("add", {hh, xt}, "lstm_gates");
        ValueId i = op("sigmoid", {gate(g, 0, "lstm_i")}, "lstm_i");
        ValueId f = op("sigmoid", {gate(g, 1, "lstm_f")}, "lstm_f");
        ValueId cand = op("tanh", {gate(g, 2, "lstm_g")}, "lstm_g");
        ValueId o = op("sigmoid", {gate(g, 3, "lstm_o")}, "lstm_o");
        cs = op("add", {op("mul", {f, cs}, "lstm_fc"), op("mul", {i, cand}, "lstm_ig")}, "lstm_c");
        h = op("mul", {o, op("tanh", {cs}, "lstm_tanh_c")}, "lstm_h");
      } else if (cell == Cell::RnnTanh || cell == Cell::RnnRelu) {
        h = op(cell == Cell::RnnTanh ? "tanh" : "relu", {op("add", {hh, xt}, "rnn_pre")}, "rnn_h");
      } else {
        ValueId r = op("sigmoid", {op("add", {gate(xt, 0, "gru_xr"), gate(hh, 0, "gru_hr")}, "gru_r_in")}, "gru_r");
        ValueId z = op("sigmoid", {op("add", {gate(xt, 1, "gru_xz"), gate(hh, 1, "gru_hz")}, "gru_z_in")}, "gru_z");
        ValueId nIn = op("add", {gate(xt, 2, "gru_xn"), op("mul", {r, gate(hh, 2, "gru_hn")}, "gru_rh")}, "gru_n_in");
        ValueId nn = op("tanh", {nIn}, "gru_n");
        h = op("add", {nn, op("mul", {z, op("sub", {h, nn}, "gru_h_minus_n")}, "gru_zh")}, "gru_h");
      }
      outs[static_cast<size_t>(t)] = reshapeTo(c, n, h, {1, batch, hidden}, "rnn_step_out");
    }
    return outs.size() == 1 ? outs[0] : c.emit(n, "concat", outs, {{"axis", int64_t{0}}}, "rnn_direction_out");
  }
};

/// aten::lstm.input(input, hx[h0, c0], params, has_biases, num_layers, dropout, train,
/// bidirectional, batch_first) and aten::gru.input / rnn_tanh.input / rnn_relu.input(input, hx,
/// params, ...): the same arguments but one state tensor.
void recurrent(Ctx& c, N n, Cell cell) {
  const size_t first = 3;  // has_biases; then num_layers, dropout, train, bidirectional, batch_first
  const Item& hasBiasesItem = c.input(n, first);  // a list of weights in the packed (data) overload
  if (n->inputs().size() != 9 || !hasBiasesItem.isConstant() || !hasBiasesItem.constant.isBool())
    Ctx::notSupported(n, "only the unpacked form (no PackedSequence) is supported");
  ValueId x = c.tensor(n, 0);
  bool hasBiases = c.toBool(n, first), bidirectional = c.toBool(n, first + 4), batchFirst = c.toBool(n, first + 5);
  int64_t layers = c.toInt(n, first + 1), dirs = bidirectional ? 2 : 1;
  if (c.type(x).rank() != 3) Ctx::fail(n, "expects a 3-D input, got " + c.type(x).str(), ErrorKind::InvalidModel);
  requireFloat(c, n, x);
  std::vector<ValueId> params = c.tensors(n, 2);
  size_t perCell = hasBiases ? 4 : 2;
  if (params.size() != static_cast<size_t>(layers * dirs) * perCell)
    Ctx::notSupported(n, std::to_string(params.size()) + " weights for " + std::to_string(layers * dirs) +
                             " layers and directions (projections, proj_size > 0, are not supported)");
  int64_t gates = gatesOf(cell);
  int64_t hidden = c.type(params[1]).shape[1];
  if (c.type(params[0]).shape[0] != gates * hidden)
    Ctx::fail(n, "weight " + c.type(params[0]).str() + " does not have " + std::to_string(gates) + " gates of " +
                     std::to_string(hidden), ErrorKind::InvalidModel);
  std::vector<ValueId> states = cell == Cell::Lstm ? c.tensors(n, 1) : std::vector<ValueId>{c.tensor(n, 1)};
  if (states.size() != (cell == Cell::Lstm ? 2u : 1u))
    Ctx::fail(n, "expects " + std::string(cell == Cell::Lstm ? "h0 and c0" : "h0"), ErrorKind::InvalidModel);
  Recurrent r{c, n, cell, hidden};
  if (batchFirst) x = c.emit(n, "transpose", {x}, {{"perm", std::vector<int64_t>{1, 0, 2}}}, "rnn_time_major");
  int64_t batch = c.type(x).shape[1];
  std::vector<ValueId> lastH, lastC;
  for (int64_t l = 0; l < layers; ++l) {
    std::vector<ValueId> dirOuts;
    for (int64_t d = 0; d < dirs; ++d) {
      int64_t k = l * dirs + d;
      auto state = [&](ValueId s, const std::string& stem) {
        return reshapeTo(c, n, r.slice(s, 0, k, k + 1, stem), {batch, hidden}, stem);
      };
      ValueId h = state(states[0], "rnn_h0"), cs = cell == Cell::Lstm ? state(states[1], "rnn_c0") : -1;
      std::vector<ValueId> w(params.begin() + static_cast<std::ptrdiff_t>(k * perCell),
                             params.begin() + static_cast<std::ptrdiff_t>((k + 1) * perCell));
      dirOuts.push_back(r.run(x, w, h, cs, d == 1));
      lastH.push_back(reshapeTo(c, n, h, {1, batch, hidden}, "rnn_h_n"));
      if (cell == Cell::Lstm) lastC.push_back(reshapeTo(c, n, cs, {1, batch, hidden}, "rnn_c_n"));
    }
    x = dirOuts.size() == 1 ? dirOuts[0] : c.emit(n, "concat", dirOuts, {{"axis", int64_t{2}}}, "rnn_layer_out");
  }
  if (batchFirst) x = c.emit(n, "transpose", {x}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
  auto stack = [&](const std::vector<ValueId>& v, const std::string& stem) {
    return v.size() == 1 ? v[0] : c.emit(n, "concat", v, {{"axis", int64_t{0}}}, stem);
  };
  c.setOutput(n, x, 0);
  c.setOutput(n, stack(lastH, "h_n"), 1);
  if (cell == Cell::Lstm) c.setOutput(n, stack(lastC, "c_n"), 2);
}

}  // namespace

void registerRecurrentOps(Table& t) {
  reg(t, "lstm", [](Ctx& c, N n) { recurrent(c, n, Cell::Lstm); });
  reg(t, "gru", [](Ctx& c, N n) { recurrent(c, n, Cell::Gru); });
  reg(t, "rnn_tanh", [](Ctx& c, N n) { recurrent(c, n, Cell::RnnTanh); });
  reg(t, "rnn_relu", [](Ctx& c, N n) { recurrent(c, n, Cell::RnnRelu); });
}

}  // namespace kiln::importers::ts
