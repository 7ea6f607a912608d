// aten::einsum(equation, tensors, path) decomposed at import into canonical operators: no einsum
// kernel. The equation (spaces allowed, letters a-z and A-Z, one "..." per operand, explicit
// "->output" or implicit: the ellipsis, then the letters used once, in alphabetical order) is
// evaluated left to right, two operands at a time:
// - an index that neither the output nor a later operand uses, and that the other operand lacks,
//   is summed away first (`sum`);
// - the pair becomes one batched product: indices in both that are still needed later are batch
//   axes, indices in both that are not are contracted (K), the rest are A's (M) or B's (N) own;
//   A is transposed to [batch, M, K] and reshaped to [batch, ΠM, ΠK], B to [batch, ΠK, ΠN],
//   `matmul` (numpy batch broadcasting), and the result reshaped to [batch, M, N];
// - finally the remaining indices not in the output are summed and the rest transposed into the
//   output's order.
// Size-1 dimensions broadcast against other sizes, as in PyTorch. An index repeated within one
// operand (a diagonal, "ii->i") is refused with one line; malformed equations are the model's
// error (InvalidModel).
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "importers/torchscript/aten_helpers.h"

namespace kiln::importers::ts {
namespace {

constexpr int kEllipsisBase = 1000;  // label of the k-th ellipsis dimension: kEllipsisBase + k

/// An operand during evaluation: a graph value and one label per axis.
struct Labeled {
  ValueId value;
  std::vector<int> labels;
};

std::string labelName(int label) {
  if (label >= kEllipsisBase) return "...";
  return std::string(1, static_cast<char>(label));
}

/// One term of the equation: letters as their character code, -1 for "...".
std::vector<int> parseTerm(N n, const std::string& term) {
  std::vector<int> out;
  for (size_t i = 0; i < term.size(); ++i) {
    char ch = term[i];
    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')) {
      out.push_back(ch);
    } else if (term.compare(i, 3, "...") == 0) {
      if (std::count(out.begin(), out.end(), -1) != 0)
        Ctx::fail(n, "more than one ellipsis in '" + term + "'", ErrorKind::InvalidModel);
      out.push_back(-1);
      i += 2;
    } else {
      Ctx::fail(n, std::string("invalid character '") + ch + "' in the equation", ErrorKind::InvalidModel);
    }
  }
  return out;
}

/// The term with its ellipsis replaced by `count` labels aligned to the right of `total`.
std::vector<int> expandEllipsis(const std::vector<int>& term, int64_t count, int64_t total) {
  std::vector<int> out;
  for (int l : term) {
    if (l != -1) {
      out.push_back(l);
      continue;
    }
    for (int64_t k = total - count; k < total; ++k) out.push_back(kEllipsisBase + static_cast<int>(k));
  }
  return out;
}

ValueId transposeTo(Ctx& c, N n, ValueId x, const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] != static_cast<int64_t>(i)) return c.emit(n, "transpose", {x}, {{"perm", perm}}, "einsum_t");
  }
  return x;
}

/// Sums away the axes whose label is not in `keep`.
Labeled sumAway(Ctx& c, N n, Labeled t, const std::set<int>& keep) {
  std::vector<int64_t> axes;
  std::vector<int> labels;
  for (size_t a = 0; a < t.labels.size(); ++a) {
    if (keep.count(t.labels[a])) {
      labels.push_back(t.labels[a]);
    } else {
      axes.push_back(static_cast<int64_t>(a));
    }
  }
  if (axes.empty()) return t;
  t.value = c.emit(n, "sum", {t.value}, {{"axes", axes}, {"keepdims", int64_t{0}}}, "einsum_sum");
  t.labels = labels;
  return t;
}

int64_t sizeOf(Ctx& c, const Labeled& t, int label) {
  auto it = std::find(t.labels.begin(), t.labels.end(), label);
  return c.type(t.value).shape[it - t.labels.begin()];
}

/// A·B over the labels they share that `later` does not need.
Labeled contract(Ctx& c, N n, Labeled a, Labeled b, const std::set<int>& later) {
  std::vector<int> batch, ks, ms, ns;
  for (int l : a.labels) {
    bool inB = std::count(b.labels.begin(), b.labels.end(), l) != 0;
    if (!inB) ms.push_back(l);
    else if (later.count(l)) batch.push_back(l);
    else ks.push_back(l);
  }
  for (int l : b.labels) {
    if (std::count(a.labels.begin(), a.labels.end(), l) == 0) ns.push_back(l);
  }
  // A contracted index of size 1 on one side only: the other side's sum over it (keepdims).
  for (int k : ks) {
    int64_t sa = sizeOf(c, a, k), sb = sizeOf(c, b, k);
    if (sa == sb) continue;
    Labeled& big = sa == 1 ? b : a;
    int64_t axis = std::find(big.labels.begin(), big.labels.end(), k) - big.labels.begin();
    big.value = c.emit(n, "sum", {big.value}, {{"axes", std::vector<int64_t>{axis}}, {"keepdims", int64_t{1}}},
                       "einsum_sum");
  }
  auto arrange = [&](const Labeled& t, const std::vector<std::vector<int>>& groups) {
    std::vector<int64_t> perm;
    for (const auto& g : groups) {
      for (int l : g) perm.push_back(std::find(t.labels.begin(), t.labels.end(), l) - t.labels.begin());
    }
    ValueId x = transposeTo(c, n, t.value, perm);
    Shape shape = c.type(x).shape, flat(shape.begin(), shape.begin() + static_cast<int64_t>(batch.size()));
    size_t at = batch.size();
    for (size_t g = 1; g < groups.size(); ++g) {
      int64_t p = 1;
      for (size_t i = 0; i < groups[g].size(); ++i) p *= shape[at++];
      flat.push_back(p);
    }
    return reshapeTo(c, n, x, flat, "einsum_in");
  };
  ValueId x = arrange(a, {batch, ms, ks}), y = arrange(b, {batch, ks, ns});
  ValueId product = c.emit(n, "matmul", {x, y}, {}, "einsum_mm");
  Shape out = c.type(product).shape;
  out.resize(batch.size());
  for (int m : ms) out.push_back(sizeOf(c, a, m));
  for (int l : ns) out.push_back(sizeOf(c, b, l));
  Labeled r{reshapeTo(c, n, product, out, "einsum_out"), batch};
  r.labels.insert(r.labels.end(), ms.begin(), ms.end());
  r.labels.insert(r.labels.end(), ns.begin(), ns.end());
  return r;
}

void einsum(Ctx& c, N n) {
  std::string equation;
  for (char ch : c.toString(n, 0)) {
    if (ch != ' ') equation += ch;
  }
  std::vector<ValueId> xs = c.tensors(n, 1);
  size_t arrow = equation.find("->");
  std::string lhs = equation.substr(0, arrow);
  std::vector<std::vector<int>> terms;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    terms.push_back(parseTerm(n, lhs.substr(start, comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != xs.size())
    Ctx::fail(n, "the equation has " + std::to_string(terms.size()) + " operands, but " +
                     std::to_string(xs.size()) + " tensors are given", ErrorKind::InvalidModel);

  // Expand the ellipses (right-aligned, numpy broadcasting) and check ranks and sizes.
  std::vector<int64_t> ellipsis(terms.size(), 0);
  int64_t total = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    int64_t letters = std::count_if(terms[i].begin(), terms[i].end(), [](int l) { return l != -1; });
    bool hasEllipsis = letters != static_cast<int64_t>(terms[i].size());
    int64_t rank = c.type(xs[i]).rank();
    if (rank < letters || (!hasEllipsis && rank != letters))
      Ctx::fail(n, "operand " + std::to_string(i) + " has rank " + std::to_string(rank) + ", but its term has " +
                       std::to_string(letters) + " indices", ErrorKind::InvalidModel);
    ellipsis[i] = rank - letters;
    total = std::max(total, ellipsis[i]);
  }
  std::vector<Labeled> ops;
  std::map<int, int> uses;
  std::map<int, int64_t> sizes;
  for (size_t i = 0; i < terms.size(); ++i) {
    Labeled t{xs[i], expandEllipsis(terms[i], ellipsis[i], total)};
    const Shape shape = c.type(xs[i]).shape;
    std::set<int> seen;
    for (size_t a = 0; a < t.labels.size(); ++a) {
      int l = t.labels[a];
      if (!seen.insert(l).second)
        Ctx::fail(n, "index '" + labelName(l) + "' repeats within operand " + std::to_string(i) +
                         " (a diagonal), which is not supported");
      ++uses[l];
      int64_t& s = sizes.emplace(l, shape[a]).first->second;
      if (s != shape[a] && s != 1 && shape[a] != 1)
        Ctx::fail(n, "index '" + labelName(l) + "' has sizes " + std::to_string(s) + " and " +
                         std::to_string(shape[a]), ErrorKind::InvalidModel);
      s = std::max(s, shape[a]);
    }
    ops.push_back(std::move(t));
  }

  std::vector<int> output;
  if (arrow != std::string::npos) {
    std::vector<int> term = parseTerm(n, equation.substr(arrow + 2));
    output = expandEllipsis(term, std::count(term.begin(), term.end(), -1) ? total : 0, total);
    std::set<int> seen;
    for (int l : output) {
      if (!uses.count(l))
        Ctx::fail(n, "output index '" + labelName(l) + "' is not in any operand", ErrorKind::InvalidModel);
      if (!seen.insert(l).second)
        Ctx::fail(n, "output index '" + labelName(l) + "' appears twice", ErrorKind::InvalidModel);
    }
  } else {
    for (int64_t k = 0; k < total; ++k) output.push_back(kEllipsisBase + static_cast<int>(k));
    for (const auto& [l, count] : uses) {  // map order: 'A'..'Z' before 'a'..'z', as PyTorch
      if (l < kEllipsisBase && count == 1) output.push_back(l);
    }
  }

  // Left to right, two operands at a time.
  std::set<int> wanted(output.begin(), output.end());
  auto neededAfter = [&](size_t i) {  // labels the output or operands after i use
    std::set<int> s = wanted;
    for (size_t j = i + 1; j < ops.size(); ++j) s.insert(ops[j].labels.begin(), ops[j].labels.end());
    return s;
  };
  Labeled acc = ops[0];
  for (size_t i = 1; i < ops.size(); ++i) {
    std::set<int> later = neededAfter(i);
    std::set<int> keepA = later, keepB = later;
    keepA.insert(ops[i].labels.begin(), ops[i].labels.end());
    keepB.insert(acc.labels.begin(), acc.labels.end());
    acc = contract(c, n, sumAway(c, n, acc, keepA), sumAway(c, n, ops[i], keepB), later);
  }
  acc = sumAway(c, n, acc, wanted);
  std::vector<int64_t> perm;
  for (int l : output) perm.push_back(std::find(acc.labels.begin(), acc.labels.end(), l) - acc.labels.begin());
  c.setOutput(n, transposeTo(c, n, acc.value, perm));
}

}  // namespace

void registerEinsumOps(Table& t) { t["aten::einsum"] = einsum; }

}  // namespace kiln::importers::ts
