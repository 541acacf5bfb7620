#pragma once
// What the Clang passes of emit_standalone share (prune_clang.cpp, fold_clang.cpp): the parse of
// the inlined source under the host shim, offsets into it, and text edits by offset.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <clang/AST/ASTContext.h>
#include <clang/Basic/SourceManager.h>
#include <clang/Frontend/ASTUnit.h>
#include <clang/Lex/Lexer.h>

namespace ropejit::inspect_detail {

// Byte offsets in the main file (the inlined source) of Clang source locations; nullopt for
// locations elsewhere (the host shim). Every pass locates its edits through it.
class MainFile {
 public:
  explicit MainFile(clang::ASTContext& ctx) : ctx_(ctx), sm_(ctx.getSourceManager()) {}

  bool contains(clang::SourceLocation loc) const {
    return loc.isValid() && sm_.getFileID(sm_.getExpansionLoc(loc)) == sm_.getMainFileID();
  }

  std::optional<unsigned> offset(clang::SourceLocation loc) const {
    if (!contains(loc)) return std::nullopt;
    return sm_.getFileOffset(sm_.getExpansionLoc(loc));
  }

  // Offset just past the token at `loc`.
  std::optional<unsigned> token_end(clang::SourceLocation loc) const {
    return offset(clang::Lexer::getLocForEndOfToken(sm_.getExpansionLoc(loc), 0, sm_, ctx_.getLangOpts()));
  }

  // The location just past the `;` that follows the token at `loc`, or an invalid one.
  clang::SourceLocation after_semicolon(clang::SourceLocation loc) const {
    return clang::Lexer::findLocationAfterToken(sm_.getExpansionLoc(loc), clang::tok::semi, sm_, ctx_.getLangOpts(),
                                                false);
  }

  llvm::StringRef text() const { return sm_.getBufferData(sm_.getMainFileID()); }

 protected:
  clang::ASTContext& ctx_;
  clang::SourceManager& sm_;
};

// The inlined text parsed as the host backend sees it, and the text of the preprocessor branches
// that parse skipped.
struct Parsed {
  std::unique_ptr<clang::ASTUnit> ast;
  std::string inactive;
};

Parsed parse(const std::string& text);

// An edit of the main file: [begin, end) becomes `text`.
struct Edit {
  unsigned begin, end;
  std::string text;
};

// Applies edits; one starting inside an earlier, wider one is dropped (a `T` inside a cut `<T>`).
std::string apply_edits(const std::string& text, std::vector<Edit> edits);

}  // namespace ropejit::inspect_detail
