#include "core/lower/peak_kernels.h"

#include <string>
#include <vector>

#include "core/lower/schedule.h"

namespace kiln::core::lower {

tir::PrimFunc fmaPeakKernel(int lanes, int chains, int64_t iters, int tasks) {
  using namespace tir;
  Buffer out = makeBuffer("out", Type::f32(), {int64_t{tasks} * lanes});
  RegisterTile acc("acc", Type::f32(), chains, lanes);
  Expr t = Var::make("t"), i = Var::make("i");
  std::vector<Stmt> init, step;
  for (int c = 0; c < chains; ++c) init.push_back(acc.set(c, Broadcast::make(f32(1e-3 * (c + 1)), lanes)));
  Expr a = Broadcast::make(f32(0.999), lanes), b = Broadcast::make(f32(1e-3), lanes);
  for (int c = 0; c < chains; ++c) step.push_back(acc.set(c, acc.get(c) * a + b));
  Expr sum = acc.get(0);
  for (int c = 1; c < chains; ++c) sum = sum + acc.get(c);
  Stmt body = Seq::make({Seq::make(init), For::make(i, i64(0), i64(iters), ForKind::Serial, Seq::make(step)),
                         Store::make(out, Ramp::make(t * lanes, i64(1), lanes), sum)});
  PrimFunc f;
  f.name = "kiln_fma_peak_" + std::to_string(lanes) + "_" + std::to_string(tasks);
  f.params = {out};
  f.body = For::make(t, i64(0), i64(tasks), ForKind::Parallel, Allocate::make(acc.buffer(), body));
  f.attrs["parallel_chunks"] = "1";
  return f;
}

tir::PrimFunc triadKernel(int lanes, int64_t m, int64_t passes, int tasks) {
  using namespace tir;
  Buffer mem = makeBuffer("mem", Type::f32(), {int64_t{tasks} * 3 * m});
  Expr t = Var::make("t"), r = Var::make("r"), v = Var::make("v");
  Expr base = t * i64(3 * m) + v * i64(lanes);
  Expr s = Broadcast::make(cast(Type::f32(), r) * f32(1e-4) + f32(0.5), lanes);
  Stmt store = vstore(mem, base, vload(mem, base + i64(m), lanes) + s * vload(mem, base + i64(2 * m), lanes));
  Stmt inner = For::make(v, i64(0), i64(m / lanes), ForKind::Serial, store);
  PrimFunc f;
  f.name = "kiln_triad_" + std::to_string(lanes) + "_" + std::to_string(tasks);
  f.params = {mem};
  f.body = For::make(t, i64(0), i64(tasks), ForKind::Parallel, For::make(r, i64(0), i64(passes), ForKind::Serial, inner));
  f.attrs["parallel_chunks"] = "1";
  return f;
}

}  // namespace kiln::core::lower
