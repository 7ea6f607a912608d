// Statements of Kiln's loop IR (TIR) and the PrimFunc that holds them.
//
// Semantics
// - Statements execute in order. For loops run `var` from `min` to `min + extent - 1`.
//   ForKind says how the loop may be executed, not what it computes:
//     Serial      in order;
//     Parallel    iterations may run concurrently on the runtime thread pool (no loop-carried
//                 dependences; writes to disjoint locations);
//     Vectorized  iterations may run as SIMD lanes (code generation vectorizes it);
//     Unrolled    the body is replicated extent times (extent must be a constant).
// - Store writes buffer[index] = value; a vector store has a Ramp index and a vector value.
// - Allocate introduces a local buffer visible in its body only (uninitialized contents).
// - LetStmt binds a Var to a value for its body (evaluated once).
// - A PrimFunc's parameters are buffers: inputs first, then `numOutputs` outputs. Its body may
//   read every parameter and writes only outputs and local buffers.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tir/expr.h"

namespace kiln::core::tir {

#define KILN_TIR_STMT_KINDS(X) \
  X(For)                       \
  X(Store)                     \
  X(Seq)                       \
  X(IfThenElse)                \
  X(Allocate)                  \
  X(LetStmt)                   \
  X(Evaluate)

enum class StmtKind : uint8_t {
#define KILN_X(name) name,
  KILN_TIR_STMT_KINDS(KILN_X)
#undef KILN_X
};

struct StmtNode {
  explicit StmtNode(StmtKind k) : kind(k) {}
  virtual ~StmtNode() = default;
  const StmtKind kind;
  template <typename T>
  const T* as() const {
    return kind == T::kKind ? static_cast<const T*>(this) : nullptr;
  }
};

class Stmt {
 public:
  Stmt() = default;
  explicit Stmt(std::shared_ptr<const StmtNode> node) : m_node(std::move(node)) {}
  bool defined() const { return m_node != nullptr; }
  const StmtNode* get() const { return m_node.get(); }
  const StmtNode* operator->() const { return m_node.get(); }
  StmtKind kind() const { return m_node->kind; }
  template <typename T>
  const T* as() const {
    return m_node ? m_node->template as<T>() : nullptr;
  }
  bool same(const Stmt& other) const { return m_node == other.m_node; }

 private:
  std::shared_ptr<const StmtNode> m_node;
};

#define KILN_STMT_NODE(Name) static constexpr StmtKind kKind = StmtKind::Name;

enum class ForKind : uint8_t { Serial, Parallel, Vectorized, Unrolled };
const char* forKindName(ForKind kind);

struct For : StmtNode {
  KILN_STMT_NODE(For)
  For(Expr v, Expr mn, Expr ext, ForKind k, Stmt b)
      : StmtNode(kKind), var(std::move(v)), min(std::move(mn)), extent(std::move(ext)), forKind(k), body(std::move(b)) {}
  Expr var;  // a Var
  Expr min, extent;
  ForKind forKind;
  Stmt body;
  static Stmt make(Expr var, Expr min, Expr extent, ForKind kind, Stmt body);
};

struct Store : StmtNode {
  KILN_STMT_NODE(Store)
  Store(Buffer b, Expr i, Expr v) : StmtNode(kKind), buffer(std::move(b)), index(std::move(i)), value(std::move(v)) {}
  Buffer buffer;
  Expr index, value;
  static Stmt make(Buffer buffer, Expr index, Expr value);
};

struct Seq : StmtNode {
  KILN_STMT_NODE(Seq)
  explicit Seq(std::vector<Stmt> s) : StmtNode(kKind), stmts(std::move(s)) {}
  std::vector<Stmt> stmts;
  /// Flattens nested Seqs; a single statement is returned as is.
  static Stmt make(std::vector<Stmt> stmts);
};

struct IfThenElse : StmtNode {
  KILN_STMT_NODE(IfThenElse)
  IfThenElse(Expr c, Stmt t, Stmt e) : StmtNode(kKind), cond(std::move(c)), thenCase(std::move(t)), elseCase(std::move(e)) {}
  Expr cond;
  Stmt thenCase, elseCase;  // elseCase may be undefined
  static Stmt make(Expr cond, Stmt thenCase, Stmt elseCase = Stmt());
};

struct Allocate : StmtNode {
  KILN_STMT_NODE(Allocate)
  Allocate(Buffer b, Stmt s) : StmtNode(kKind), buffer(std::move(b)), body(std::move(s)) {}
  Buffer buffer;
  Stmt body;
  static Stmt make(Buffer buffer, Stmt body);
};

struct LetStmt : StmtNode {
  KILN_STMT_NODE(LetStmt)
  LetStmt(Expr v, Expr val, Stmt b) : StmtNode(kKind), var(std::move(v)), value(std::move(val)), body(std::move(b)) {}
  Expr var, value;
  Stmt body;
  static Stmt make(Expr var, Expr value, Stmt body);
};

struct Evaluate : StmtNode {
  KILN_STMT_NODE(Evaluate)
  explicit Evaluate(Expr v) : StmtNode(kKind), value(std::move(v)) {}
  Expr value;
  static Stmt make(Expr value);
};

/// A compiled unit: `void name(void* const* args)` at the ABI level (runtime/kernel_abi.h).
struct PrimFunc {
  std::string name;
  std::vector<Buffer> params;  // inputs then outputs
  int numOutputs = 1;
  Stmt body;
  std::map<std::string, std::string> attrs;  // e.g. "workload_key", "ops"
};

}  // namespace kiln::core::tir
