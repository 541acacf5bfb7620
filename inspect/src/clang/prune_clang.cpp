// emit_standalone's pruning pass with Clang libTooling: parse the inlined source as C++ under the
// host shim (the host backend's view of CUDA), then remove by source range what this one kernel
// never uses. Only removals: the text left is the original text, comments and macros included.
#include <algorithm>
#include <cctype>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <clang/AST/ASTContext.h>
#include <clang/AST/DeclTemplate.h>
#include <clang/AST/ParentMapContext.h>
#include <clang/AST/RawCommentList.h>
#include <clang/AST/RecursiveASTVisitor.h>
#include <clang/Basic/SourceManager.h>
#include <clang/Format/Format.h>
#include <clang/Frontend/ASTUnit.h>
#include <clang/Frontend/TextDiagnosticPrinter.h>
#include <clang/Lex/Lexer.h>
#include <clang/Lex/PreprocessingRecord.h>
#include <clang/Lex/Preprocessor.h>
#include <clang/Tooling/Core/Replacement.h>
#include <clang/Tooling/Tooling.h>
#include <fmt/format.h>
#include <llvm/Support/raw_ostream.h>

#include "clang_source.h"
#include "prune.h"
#include "ropejit/error.h"

namespace ropejit::inspect_detail {

namespace {

struct Cut {
  unsigned begin, end;  // byte offsets in the main file, end exclusive
  bool brace = false;   // one brace of an unwrapped block: a comment after it stays
};

// What one pass finds: constexpr-if decisions (per `if` location: 1 = true seen, 2 = false seen)
// with their uninstantiated statements, and declarations nothing uses.
class Collector : public clang::RecursiveASTVisitor<Collector>, MainFile {
 public:
  // `inactive` is the text of the preprocessor branches this parse skipped (the CUDA side of
  // `#if __CUDA_ARCH__`): a name used there is kept though this parse sees no use of it.
  Collector(clang::ASTContext& ctx, std::string keep, std::string inactive)
      : MainFile(ctx), keep_(std::move(keep)), inactive_(std::move(inactive)) {}

  bool shouldVisitTemplateInstantiations() const { return true; }

  bool VisitIfStmt(clang::IfStmt* s) {
    if (!s->isConstexpr()) return true;
    const auto at = offset(s->getIfLoc());
    if (!at) return true;
    const clang::Expr* cond = s->getCond();
    const bool dependent = !cond || cond->isValueDependent() || cond->isInstantiationDependent();
    // The template's own statement keeps both branches: its ranges are the ones to cut.
    if (dependent || !in_instantiation_) patterns_[*at] = s;
    bool value = false;
    if (!dependent && cond->EvaluateAsBooleanCondition(value, ctx_)) seen_[*at] |= value ? 1 : 2;
    return true;
  }

  bool TraverseFunctionDecl(clang::FunctionDecl* f) {
    const bool saved = in_instantiation_;
    in_instantiation_ = saved || f->isTemplateInstantiation();
    const bool ok = clang::RecursiveASTVisitor<Collector>::TraverseFunctionDecl(f);
    in_instantiation_ = saved;
    return ok;
  }

  bool VisitFunctionDecl(clang::FunctionDecl* f) {
    if (f->isTemplateInstantiation() || f->getDescribedFunctionTemplate() || llvm::isa<clang::CXXMethodDecl>(f)) return true;
    if (f->getName() == keep_ || !f->isThisDeclarationADefinition()) return true;
    if (!f->isUsed() && !f->isReferenced()) cut_decl(f);
    return true;
  }

  bool VisitFunctionTemplateDecl(clang::FunctionTemplateDecl* t) {
    if (llvm::isa<clang::CXXRecordDecl>(t->getDeclContext())) return true;
    for (const clang::FunctionDecl* spec : t->specializations())
      if (spec->isUsed() || spec->isReferenced()) return true;
    if (!t->isReferenced()) cut_decl(t);
    return true;
  }

  bool VisitClassTemplateDecl(clang::ClassTemplateDecl* t) {
    if (t->specializations().empty() && !t->isReferenced()) cut_decl(t);
    return true;
  }

  bool VisitCXXRecordDecl(clang::CXXRecordDecl* r) {
    if (r->isImplicit() || r->getDescribedClassTemplate() || llvm::isa<clang::ClassTemplateSpecializationDecl>(r) ||
        !r->isThisDeclarationADefinition() || r->isLambda())
      return true;
    if (!r->isReferenced()) unreferenced_records_.push_back(r);  // judged in cuts()
    return true;
  }

  // A record named only through a qualifier (`Traits::kPageSize` in code that is no template
  // any more) is used, though Clang does not always mark it referenced.
  bool TraverseNestedNameSpecifierLoc(clang::NestedNameSpecifierLoc loc) {
    if (loc)
      if (const clang::CXXRecordDecl* r = loc.getNestedNameSpecifier()->getAsRecordDecl())
        qualified_records_.insert(r->getCanonicalDecl());
    return clang::RecursiveASTVisitor<Collector>::TraverseNestedNameSpecifierLoc(loc);
  }

  bool VisitVarDecl(clang::VarDecl* v) {
    // A constexpr local nothing reads any more (the `bytes` of a vector access whose width
    // branches went): cut in the template itself, not per instantiation.
    if (v->isLocalVarDecl() && v->isConstexpr() && !in_instantiation_ && !v->isReferenced()) {
      cut_decl(v);
      return true;
    }
    if (llvm::isa<clang::ParmVarDecl>(v) || v->isLocalVarDeclOrParm() || v->isTemplated() ||
        v->getTemplateSpecializationKind() != clang::TSK_Undeclared)
      return true;
    if (!v->isReferenced() && !v->isUsed()) cut_decl(v);
    return true;
  }

  bool VisitTypedefNameDecl(clang::TypedefNameDecl* t) {
    if (!t->getDeclContext()->isFunctionOrMethod() && !t->isReferenced()) cut_decl(t);
    return true;
  }

  // The cuts of this pass: dead branches, then unused declarations.
  std::vector<Cut> cuts() {
    for (const clang::CXXRecordDecl* r : unreferenced_records_)
      if (!qualified_records_.count(r->getCanonicalDecl())) cut_decl(r);
    unreferenced_records_.clear();
    std::vector<Cut> out = decl_cuts_;
    for (const auto& [at, seen] : seen_) {
      if (seen == 3) continue;  // both values in different instantiations: keep the `if`
      const auto pattern = patterns_.find(at);
      if (pattern == patterns_.end()) continue;
      branch_cuts(pattern->second, seen == 1, out);
    }
    return out;
  }

 private:
  // Offset past a statement's last token, and its `;` when the statement is not a block.
  std::optional<unsigned> stmt_end(const clang::Stmt* s) const {
    if (!llvm::isa<clang::CompoundStmt>(s))
      if (const auto semi = after_semicolon(s->getEndLoc()); semi.isValid()) return offset(semi);
    return token_end(s->getEndLoc());
  }

  void branch_cuts(const clang::IfStmt* s, bool taken, std::vector<Cut>& out) const {
    const auto begin = offset(s->getIfLoc());
    const auto then_begin = offset(s->getThen()->getBeginLoc());
    const auto then_end = stmt_end(s->getThen());
    if (!begin || !then_begin || !then_end) return;
    const clang::Stmt* otherwise = s->getElse();
    if (taken) {  // keep the then-branch, drop `if constexpr (...)` and `else ...`
      out.push_back({*begin, *then_begin});
      if (otherwise)
        if (const auto else_end = stmt_end(otherwise)) out.push_back({*then_end, *else_end});
      unwrap(s, s->getThen(), out);
    } else if (otherwise) {  // keep the else-branch
      if (const auto else_begin = offset(otherwise->getBeginLoc())) out.push_back({*begin, *else_begin});
      unwrap(s, otherwise, out);
    } else {
      out.push_back({*begin, *then_end});
    }
  }

  // The braces of a kept branch go too when that cannot change meaning: the `if` sat directly in
  // a block, and the branch declares nothing its enclosing block could see.
  void unwrap(const clang::IfStmt* s, const clang::Stmt* branch, std::vector<Cut>& out) const {
    const auto* block = llvm::dyn_cast<clang::CompoundStmt>(branch);
    if (!block) return;
    for (const clang::Stmt* child : block->body())
      if (llvm::isa<clang::DeclStmt>(child)) return;
    const auto parents = ctx_.getParents(*s);
    if (parents.size() != 1 || !parents[0].get<clang::CompoundStmt>()) return;
    const auto open = offset(block->getLBracLoc()), close = offset(block->getRBracLoc());
    if (!open || !close) return;
    out.push_back({*open, *open + 1, true});
    out.push_back({*close, *close + 1, true});
  }

  // A declaration with its attached comment, its `;`, and the CUDA keywords before it (macros
  // the shim expands to nothing, so outside the declaration's range).
  void cut_decl(const clang::Decl* d) {
    if (const auto* named = llvm::dyn_cast<clang::NamedDecl>(d); named && used_in_inactive(named->getName().str()))
      return;
    auto begin = offset(d->getBeginLoc());
    auto end = token_end(d->getEndLoc());
    if (!begin || !end) return;
    const auto semi = after_semicolon(d->getEndLoc());
    if (const auto after = offset(semi); semi.isValid() && after) end = after;
    if (const clang::RawComment* c = ctx_.getRawCommentForDeclNoCache(d))
      if (const auto comment = offset(c->getBeginLoc()); comment && *comment < *begin) begin = comment;
    decl_cuts_.push_back({*begin, *end});
  }

  bool used_in_inactive(const std::string& name) const {
    if (name.empty()) return false;
    for (size_t at = inactive_.find(name); at != std::string::npos; at = inactive_.find(name, at + 1)) {
      const auto word = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; };
      const bool starts = at == 0 || !word(inactive_[at - 1]);
      const bool ends = at + name.size() >= inactive_.size() || !word(inactive_[at + name.size()]);
      if (starts && ends) return true;
    }
    return false;
  }

  std::string keep_;
  std::vector<const clang::CXXRecordDecl*> unreferenced_records_;
  std::set<const clang::Decl*> qualified_records_;
  std::string inactive_;
  bool in_instantiation_ = false;
  std::map<unsigned, const clang::IfStmt*> patterns_;
  std::map<unsigned, int> seen_;
  std::vector<Cut> decl_cuts_;
};

bool is_keyword_before(const std::string& word) {
  return word == "__device__" || word == "__host__" || word == "__forceinline__" || word == "ROPEJIT_HOST_DEVICE" ||
         word == "static" || word == "inline" || word == "constexpr";
}

// Widens a cut over the CUDA keywords just before it and to whole lines where it covers them.
Cut widen(const std::string& text, Cut c) {
  for (;;) {  // words before the cut on its line: `__device__ __forceinline__`
    size_t at = c.begin;
    while (at > 0 && (text[at - 1] == ' ' || text[at - 1] == '\t')) --at;
    size_t word = at;
    while (word > 0 && (std::isalnum(static_cast<unsigned char>(text[word - 1])) || text[word - 1] == '_')) --word;
    if (word == at || !is_keyword_before(text.substr(word, at - word))) break;
    c.begin = static_cast<unsigned>(word);
  }
  if (!c.brace) {  // a trailing `// ...` on the cut's last line belonged to what went
    size_t after = c.end;
    while (after < text.size() && (text[after] == ' ' || text[after] == '\t')) ++after;
    if (text.compare(after, 2, "//") == 0) c.end = static_cast<unsigned>(text.find('\n', after) == std::string::npos
                                                                             ? text.size() : text.find('\n', after));
  }
  size_t line_begin = c.begin;
  while (line_begin > 0 && (text[line_begin - 1] == ' ' || text[line_begin - 1] == '\t')) --line_begin;
  if (line_begin == 0 || text[line_begin - 1] == '\n') {
    size_t after = c.end;
    while (after < text.size() && (text[after] == ' ' || text[after] == '\t')) ++after;
    if (after == text.size() || text[after] == '\n') {
      c.begin = static_cast<unsigned>(line_begin);
      c.end = static_cast<unsigned>(after < text.size() ? after + 1 : after);
    }
  }
  return c;
}

std::string apply_cuts(const std::string& text, std::vector<Cut> cuts) {
  const auto by_begin = [](const Cut& a, const Cut& b) { return a.begin < b.begin; };
  std::sort(cuts.begin(), cuts.end(), by_begin);
  std::vector<Cut> merged;  // touching cuts as one (`if constexpr (c) ` and its `{`), then widened
  for (const Cut& c : cuts) {
    if (!merged.empty() && c.begin <= merged.back().end) {
      if (c.end >= merged.back().end) merged.back().brace = c.brace;
      merged.back().end = std::max(merged.back().end, c.end);
    } else {
      merged.push_back(c);
    }
  }
  cuts.clear();
  for (const Cut& c : merged) cuts.push_back(widen(text, c));
  std::sort(cuts.begin(), cuts.end(), by_begin);
  std::string out;
  size_t at = 0;
  for (const Cut& c : cuts) {
    if (c.end <= at) continue;  // inside a cut already made
    if (c.begin > at) out.append(text, at, c.begin - at);
    at = std::max<size_t>(at, c.end);
  }
  out.append(text, at, std::string::npos);
  // No runs of blank lines where declarations went.
  std::string tidy;
  int newlines = 0;
  for (char ch : out) {
    newlines = ch == '\n' ? newlines + 1 : (ch == ' ' || ch == '\t' ? newlines : 0);
    if (ch == '\n' && newlines > 2) continue;
    tidy += ch;
  }
  return tidy;
}

// One parse and one round of cuts; nullopt when nothing is left to cut.
std::optional<std::string> prune_once(const std::string& text, const std::string& keep) {
  Parsed parsed = parse(text);
  std::unique_ptr<clang::ASTUnit>& ast = parsed.ast;
  const std::string& inactive = parsed.inactive;
  Collector collector(ast->getASTContext(), keep, inactive);
  collector.TraverseDecl(ast->getASTContext().getTranslationUnitDecl());
  const std::vector<Cut> cuts = collector.cuts();
  if (cuts.empty()) return std::nullopt;
  std::string next = apply_cuts(text, cuts);
  if (next == text) return std::nullopt;
  return next;
}


// Templates instantiated only for the generated `Traits` become plain code: their `template <class T>`
// goes, each `T` in them reads `Traits`, and every `<T>` / `<Traits>` naming one of them goes.
class Detemplater : public clang::RecursiveASTVisitor<Detemplater>, MainFile {
 public:
  explicit Detemplater(clang::ASTContext& ctx) : MainFile(ctx) {}

  // Pass 1: which templates qualify.
  void collect(clang::TranslationUnitDecl* tu) {
    collecting_ = true;
    TraverseDecl(tu);
    collecting_ = false;
  }

  bool VisitFunctionTemplateDecl(clang::FunctionTemplateDecl* t) {
    if (collecting_) {
      bool only_traits = !t->specializations().empty();
      for (const clang::FunctionDecl* f : t->specializations()) only_traits = only_traits && traits_args(f->getTemplateSpecializationArgs());
      consider(t, only_traits);
    } else if (targets_.count(t)) {
      cut_header(t);
    }
    return true;
  }

  bool VisitClassTemplateDecl(clang::ClassTemplateDecl* t) {
    if (collecting_) {
      bool only_traits = !t->specializations().empty();
      for (const clang::ClassTemplateSpecializationDecl* r : t->specializations())
        only_traits = only_traits && traits_args(&r->getTemplateArgs());
      consider(t, only_traits);
    } else if (targets_.count(t)) {
      cut_header(t);
    }
    return true;
  }

  bool VisitTemplateTypeParmTypeLoc(clang::TemplateTypeParmTypeLoc tl) {
    if (!collecting_ && params_.count(tl.getDecl())) replace_token(tl.getNameLoc(), "Traits");
    return true;
  }

  bool VisitDeclRefExpr(clang::DeclRefExpr* e) {
    if (collecting_ || !e->hasExplicitTemplateArgs()) return true;
    if (const auto* f = llvm::dyn_cast<clang::FunctionDecl>(e->getDecl()))
      if (f->getPrimaryTemplate() && targets_.count(f->getPrimaryTemplate())) cut_angles(e->getLAngleLoc(), e->getRAngleLoc());
    return true;
  }

  bool VisitUnresolvedLookupExpr(clang::UnresolvedLookupExpr* e) {
    // Only a lone `<T>`: `f<T, kStep>` names a template that keeps its parameters (an overload
    // of the same name may be a target).
    if (collecting_ || !e->hasExplicitTemplateArgs() || e->getNumTemplateArgs() != 1) return true;
    for (const clang::NamedDecl* d : e->decls())
      if (targets_.count(d)) {
        cut_angles(e->getLAngleLoc(), e->getRAngleLoc());
        break;
      }
    return true;
  }

  bool VisitTemplateSpecializationTypeLoc(clang::TemplateSpecializationTypeLoc tl) {
    if (collecting_) return true;
    if (const clang::TemplateDecl* t = tl.getTypePtr()->getTemplateName().getAsTemplateDecl(); t && targets_.count(t))
      cut_angles(tl.getLAngleLoc(), tl.getRAngleLoc());
    return true;
  }

  const std::vector<Edit>& edits() const { return edits_; }

 private:
  static bool traits_args(const clang::TemplateArgumentList* args) {
    if (!args || args->size() != 1 || args->get(0).getKind() != clang::TemplateArgument::Type) return false;
    const auto* record = args->get(0).getAsType()->getAsCXXRecordDecl();
    return record && record->getName() == "Traits";
  }

  void consider(clang::TemplateDecl* t, bool only_traits) {
    const clang::TemplateParameterList* list = t->getTemplateParameters();
    if (!only_traits || list->size() != 1 || !contains(list->getTemplateLoc())) return;
    const auto* param = llvm::dyn_cast<clang::TemplateTypeParmDecl>(list->getParam(0));
    if (!param || param->hasDefaultArgument()) return;
    targets_.insert(t);
    params_.insert(param);
  }

  void cut_header(const clang::TemplateDecl* t) {
    const clang::TemplateParameterList* list = t->getTemplateParameters();
    const auto begin = offset(list->getTemplateLoc());
    auto end = token_end(list->getRAngleLoc());
    if (!begin || !end) return;
    const llvm::StringRef text = this->text();
    size_t after = *end;  // the header's own line goes with it
    while (after < text.size() && (text[after] == ' ' || text[after] == '\t')) ++after;
    if (after < text.size() && text[after] == '\n') end = static_cast<unsigned>(after + 1);
    edits_.push_back({*begin, *end, ""});
  }

  void cut_angles(clang::SourceLocation l, clang::SourceLocation r) {
    const auto begin = offset(l), end = token_end(r);
    if (begin && end) edits_.push_back({*begin, *end, ""});
  }

  void replace_token(clang::SourceLocation loc, const std::string& text) {
    const auto begin = offset(loc), end = token_end(loc);
    if (begin && end) edits_.push_back({*begin, *end, text});
  }

  bool collecting_ = false;
  std::set<const clang::Decl*> targets_;
  std::set<const clang::TemplateTypeParmDecl*> params_;
  std::vector<Edit> edits_;
};

}  // namespace

bool pruner_available() noexcept { return true; }

std::string prune_source(const std::string& text, const std::string& keep) {
  std::string current = text;
  // Each round can leave more unused (a function only its removed caller called): repeat.
  for (int round = 0; round < 8; ++round) {
    auto next = prune_once(current, keep);
    if (!next) break;
    current = std::move(*next);
  }
  return current;
}

std::string detemplate_source(const std::string& text) {
  Parsed parsed = parse(text);
  clang::ASTContext& ctx = parsed.ast->getASTContext();
  Detemplater detemplater(ctx);
  detemplater.collect(ctx.getTranslationUnitDecl());
  detemplater.TraverseDecl(ctx.getTranslationUnitDecl());
  return apply_edits(text, detemplater.edits());
}

std::string format_source(const std::string& text) {
  clang::format::FormatStyle style = clang::format::getGoogleStyle(clang::format::FormatStyle::LK_Cpp);
  style.ColumnLimit = 110;
  style.IndentWidth = 2;
  style.SortIncludes = clang::format::FormatStyle::SI_Never;
  style.ReflowComments = false;
  style.DerivePointerAlignment = false;
  style.Standard = clang::format::FormatStyle::LS_Cpp17;
  const clang::tooling::Replacements replacements =
      clang::format::reformat(style, text, {clang::tooling::Range(0, static_cast<unsigned>(text.size()))}, "standalone.cu");
  auto formatted = clang::tooling::applyAllReplacements(text, replacements);
  if (!formatted) {
    std::string message = llvm::toString(formatted.takeError());
    throw Error(Status::internal, "emit_standalone: clang-format failed: " + message);
  }
  return *formatted;
}

}  // namespace ropejit::inspect_detail
