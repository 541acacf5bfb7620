// emit_standalone without Clang (ROPEJIT_HOST_BACKEND off): no pruning pass.
#include "prune.h"
#include "ropejit/error.h"

namespace ropejit::inspect_detail {

bool pruner_available() noexcept { return false; }

std::string prune_source(const std::string&, const std::string&) {
  throw Error(Status::unsupported, "emit --standalone needs Clang libTooling: this build has no host backend "
                                   "(configure with -DROPEJIT_HOST_BACKEND=ON)");
}

std::string detemplate_source(const std::string& text) { return text; }

std::string fold_constants(const std::string& text) { return text; }

std::string format_source(const std::string& text) { return text; }

}  // namespace ropejit::inspect_detail
