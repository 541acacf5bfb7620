// emit_standalone's folding pass: a constexpr function of no arguments that returns a struct
// (rope_shape: the work decomposition) returns its value as literals, so the reader sees this
// kernel's numbers and the general formula behind them (make_work_shape) is pruned as unused.
#include <clang/AST/APValue.h>
#include <clang/AST/RecursiveASTVisitor.h>
#include <llvm/ADT/StringExtras.h>

#include "clang_source.h"
#include "prune.h"

namespace ropejit::inspect_detail {

namespace {

class Folder : public clang::RecursiveASTVisitor<Folder>, MainFile {
 public:
  explicit Folder(clang::ASTContext& ctx) : MainFile(ctx) {}

  bool VisitFunctionDecl(clang::FunctionDecl* f) {
    if (!f->isConstexpr() || f->getNumParams() != 0 || f->isDependentContext() || f->isTemplateInstantiation() ||
        !f->doesThisDeclarationHaveABody() || !contains(f->getLocation()))
      return true;
    const auto* record = f->getReturnType()->getAsCXXRecordDecl();
    const auto* body = llvm::dyn_cast_or_null<clang::CompoundStmt>(f->getBody());
    if (!record || !record->isAggregate() || record->getNumBases() != 0 || !body || body->size() != 1) return true;
    const auto* ret = llvm::dyn_cast<clang::ReturnStmt>(body->body_front());
    const clang::Expr* value = ret ? ret->getRetValue() : nullptr;
    if (!value || llvm::isa<clang::InitListExpr>(value->IgnoreImplicit())) return true;
    clang::Expr::EvalResult result;
    if (!value->EvaluateAsRValue(result, ctx_) || !result.Val.isStruct()) return true;
    std::string init = "{";
    unsigned i = 0;
    for (const clang::FieldDecl* field : record->fields()) {
      const clang::APValue& v = result.Val.getStructField(i);
      if (!v.isInt()) return true;  // only scalar members fold to literals
      init += (i++ ? ", /*" : "/*") + field->getName().str() + "=*/" +
              (field->getType()->isBooleanType() ? (v.getInt().getBoolValue() ? "true" : "false")
                                                  : llvm::toString(v.getInt(), 10));
    }
    const auto begin = offset(value->getBeginLoc()), end = token_end(value->getEndLoc());
    if (begin && end) edits_.push_back({*begin, *end, init + "}"});
    return true;
  }

  const std::vector<Edit>& edits() const { return edits_; }

 private:
  std::vector<Edit> edits_;
};

}  // namespace

std::string fold_constants(const std::string& text) {
  Parsed parsed = parse(text);
  clang::ASTContext& ctx = parsed.ast->getASTContext();
  Folder folder(ctx);
  folder.TraverseDecl(ctx.getTranslationUnitDecl());
  return apply_edits(text, folder.edits());
}

}  // namespace ropejit::inspect_detail
