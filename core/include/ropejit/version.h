#pragma once
/// The library version, part of every cache key and generated source header.

namespace ropejit {

/// ropejit's version string ("0.1.0").
const char* version() noexcept;

}  // namespace ropejit
