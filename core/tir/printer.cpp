#include "core/tir/printer.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "core/tir/functor.h"

namespace kiln::core::tir {
namespace {

class Printer : public IRVisitor {
 public:
  std::string str() const { return m_os.str(); }

  void printFunc(const PrimFunc& f) {
    m_os << "func " << f.name << "(";
    for (size_t i = 0; i < f.params.size(); ++i) {
      const Buffer& b = f.params[i];
      m_os << (i ? ", " : "") << b->name << ": " << b->elemType.str() << shape(b->shape);
    }
    m_os << ") {\n";
    m_indent = 1;
    visitStmt(f.body);
    m_os << "}\n";
  }

  void printStmtRoot(const Stmt& s) { visitStmt(s); }
  void printExprRoot(const Expr& e) { visitExpr(e); }

 protected:
  using IRVisitor::visit;

  static std::string shape(const std::vector<int64_t>& s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
    return out + "]";
  }
  void indent() {
    for (int i = 0; i < m_indent; ++i) m_os << "  ";
  }
  std::string varName(const Var* v) {
    auto it = m_varNames.find(v);
    if (it != m_varNames.end()) return it->second;
    int& count = m_nameUse[v->name];
    std::string name = count == 0 ? v->name : v->name + "_" + std::to_string(count);
    ++count;
    m_varNames[v] = name;
    return name;
  }

  void visit(const IntImm* op) override {
    m_os << op->value;
    if (op->type != Type::i64()) m_os << "_" << op->type.str();
  }
  void visit(const FloatImm* op) override {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.9g", op->value);
    std::string s = buf;
    if (std::isfinite(op->value) && s.find_first_of(".e") == std::string::npos) s += ".0";
    m_os << s << (op->type.bits == 32 ? "f" : "");
  }
  void visit(const Var* op) override { m_os << varName(op); }
  void visit(const Cast* op) override {
    m_os << op->type.str() << "(";
    visitExpr(op->value);
    m_os << ")";
  }
  void binary(const Expr& a, const char* sym, const Expr& b) {
    m_os << "(";
    visitExpr(a);
    m_os << " " << sym << " ";
    visitExpr(b);
    m_os << ")";
  }
  void fn(const char* name, std::initializer_list<Expr> args) {
    m_os << name << "(";
    bool first = true;
    for (const Expr& a : args) {
      if (!first) m_os << ", ";
      visitExpr(a);
      first = false;
    }
    m_os << ")";
  }
  void visit(const Add* op) override { binary(op->a, "+", op->b); }
  void visit(const Sub* op) override { binary(op->a, "-", op->b); }
  void visit(const Mul* op) override { binary(op->a, "*", op->b); }
  void visit(const Div* op) override { binary(op->a, "/", op->b); }
  void visit(const Mod* op) override { binary(op->a, "%", op->b); }
  void visit(const Min* op) override { fn("min", {op->a, op->b}); }
  void visit(const Max* op) override { fn("max", {op->a, op->b}); }
  void visit(const EQ* op) override { binary(op->a, "==", op->b); }
  void visit(const NE* op) override { binary(op->a, "!=", op->b); }
  void visit(const LT* op) override { binary(op->a, "<", op->b); }
  void visit(const LE* op) override { binary(op->a, "<=", op->b); }
  void visit(const GT* op) override { binary(op->a, ">", op->b); }
  void visit(const GE* op) override { binary(op->a, ">=", op->b); }
  void visit(const And* op) override { binary(op->a, "&&", op->b); }
  void visit(const Or* op) override { binary(op->a, "||", op->b); }
  void visit(const Not* op) override {
    m_os << "!";
    visitExpr(op->a);
  }
  void visit(const Select* op) override { fn("select", {op->cond, op->trueValue, op->falseValue}); }
  void visit(const Load* op) override {
    m_os << op->buffer->name << "[";
    visitExpr(op->index);
    m_os << "]";
  }
  void visit(const Ramp* op) override {
    m_os << "ramp(";
    visitExpr(op->base);
    m_os << ", ";
    visitExpr(op->stride);
    m_os << ", " << op->lanes << ")";
  }
  void visit(const Broadcast* op) override {
    m_os << "x" << op->lanes << "(";
    visitExpr(op->value);
    m_os << ")";
  }
  void visit(const Call* op) override {
    m_os << op->name << "(";
    for (size_t i = 0; i < op->args.size(); ++i) {
      if (i) m_os << ", ";
      visitExpr(op->args[i]);
    }
    m_os << ")";
  }

  void visit(const For* op) override {
    indent();
    m_os << forKindName(op->forKind) << " (";
    visitExpr(op->var);
    m_os << ", ";
    visitExpr(op->min);
    m_os << ", ";
    visitExpr(op->extent);
    m_os << ") {\n";
    ++m_indent;
    visitStmt(op->body);
    --m_indent;
    indent();
    m_os << "}\n";
  }
  void visit(const Store* op) override {
    indent();
    m_os << op->buffer->name << "[";
    visitExpr(op->index);
    m_os << "] = ";
    visitExpr(op->value);
    m_os << "\n";
  }
  void visit(const IfThenElse* op) override {
    indent();
    m_os << "if (";
    visitExpr(op->cond);
    m_os << ") {\n";
    ++m_indent;
    visitStmt(op->thenCase);
    --m_indent;
    if (op->elseCase.defined()) {
      indent();
      m_os << "} else {\n";
      ++m_indent;
      visitStmt(op->elseCase);
      --m_indent;
    }
    indent();
    m_os << "}\n";
  }
  void visit(const Allocate* op) override {
    indent();
    m_os << "allocate " << op->buffer->name << ": " << op->buffer->elemType.str() << shape(op->buffer->shape)
         << "\n";
    visitStmt(op->body);
  }
  void visit(const LetStmt* op) override {
    indent();
    m_os << "let ";
    visitExpr(op->var);
    m_os << " = ";
    visitExpr(op->value);
    m_os << "\n";
    visitStmt(op->body);
  }
  void visit(const Evaluate* op) override {
    indent();
    visitExpr(op->value);
    m_os << "\n";
  }

 private:
  std::ostringstream m_os;
  int m_indent = 0;
  std::map<const Var*, std::string> m_varNames;
  std::map<std::string, int> m_nameUse;
};

}  // namespace

std::string print(const Expr& e) {
  Printer p;
  p.printExprRoot(e);
  return p.str();
}

std::string print(const Stmt& s) {
  Printer p;
  p.printStmtRoot(s);
  return p.str();
}

std::string print(const PrimFunc& f) {
  Printer p;
  p.printFunc(f);
  return p.str();
}

}  // namespace kiln::core::tir
