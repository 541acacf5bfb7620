#pragma once
// The Clang side of emit_standalone (inspect/src/clang/prune_clang.cpp, built with the host
// backend's Clang and -fno-rtti): plain strings in and out, so no Clang type leaves it.
#include <string>

namespace ropejit::inspect_detail {

/// True when the Clang pruner is built in.
bool pruner_available() noexcept;

/// One self-contained source (no ropejit includes) with dead `if constexpr` branches and unused
/// declarations removed, repeated until nothing more goes. `keep` names the entry point.
/// Throws Error(internal) when Clang cannot parse the text (the log in the message).
std::string prune_source(const std::string& text, const std::string& keep);

/// Templates instantiated only for `Traits` (which must come before them) as plain code.
std::string detemplate_source(const std::string& text);

/// Constexpr functions of no arguments returning a struct (rope_shape) return literals instead.
std::string fold_constants(const std::string& text);

/// clang-format with ropejit's fixed style.
std::string format_source(const std::string& text);

}  // namespace ropejit::inspect_detail
