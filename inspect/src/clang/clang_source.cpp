// The parse and the edits the Clang passes of emit_standalone share (clang_source.h).
#include "clang_source.h"

#include <algorithm>

#include <clang/Frontend/TextDiagnosticPrinter.h>
#include <clang/Lex/PreprocessingRecord.h>
#include <clang/Lex/Preprocessor.h>
#include <clang/Tooling/Tooling.h>
#include <llvm/Support/raw_ostream.h>

#include "ropejit/embedded_templates.h"
#include "ropejit/error.h"

namespace ropejit::inspect_detail {

namespace {

constexpr const char* kMainFile = "/ropejit-inspect/standalone.cu";
constexpr const char* kShimFile = "/ropejit-inspect/host_shim.cuh";

std::string shim_text() {
  for (const EmbeddedFile& f : embedded_templates())
    if (f.name == "ropejit/host_shim.cuh") return std::string(f.text);
  throw Error(Status::internal, "emit_standalone: the host shim is not embedded");
}

}  // namespace

Parsed parse(const std::string& text) {
  std::string log;
  llvm::raw_string_ostream log_stream(log);
  auto diag_options = llvm::makeIntrusiveRefCnt<clang::DiagnosticOptions>();
  clang::TextDiagnosticPrinter printer(log_stream, diag_options.get());
  const std::vector<std::string> args = {"-x", "c++", "-std=c++17", "-fparse-all-comments", "-nostdinc",
                                         "-Wno-everything", "-Xclang", "-detailed-preprocessing-record",
                                         "-include", kShimFile};
  clang::tooling::FileContentMappings files = {{kShimFile, shim_text()}};
  Parsed out;
  out.ast = clang::tooling::buildASTFromCodeWithArgs(
      text, args, kMainFile, "ropejit-inspect", std::make_shared<clang::PCHContainerOperations>(),
      clang::tooling::getClangStripDependencyFileAdjuster(), files, &printer);
  log_stream.flush();
  if (!out.ast || out.ast->getDiagnostics().hasErrorOccurred())
    throw Error(Status::internal, "emit_standalone: Clang cannot parse the source:\n" + log);
  if (clang::PreprocessingRecord* record = out.ast->getPreprocessor().getPreprocessingRecord()) {
    const clang::SourceManager& sm = out.ast->getSourceManager();
    for (const clang::SourceRange& r : record->getSkippedRanges())
      if (sm.getFileID(r.getBegin()) == sm.getMainFileID())
        out.inactive += text.substr(sm.getFileOffset(r.getBegin()), sm.getFileOffset(r.getEnd()) - sm.getFileOffset(r.getBegin())) + "\n";
  }
  return out;
}


std::string apply_edits(const std::string& text, std::vector<Edit> edits) {
  std::sort(edits.begin(), edits.end(),
            [](const Edit& a, const Edit& b) { return a.begin != b.begin ? a.begin < b.begin : a.end > b.end; });
  std::string out;
  size_t at = 0;
  for (const Edit& e : edits) {
    if (e.begin < at) continue;
    out.append(text, at, e.begin - at);
    out += e.text;
    at = e.end;
  }
  out.append(text, at, std::string::npos);
  return out;
}


}  // namespace ropejit::inspect_detail
