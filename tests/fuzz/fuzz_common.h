#pragma once
// Helpers shared by the libFuzzer targets (tests/fuzz/README.md): what counts as a finding, a
// scratch folder, and a bounds-checked reader of the fuzzer's bytes.
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>

namespace ropejit::fuzz {

/// A broken promise of the library (not a crash the sanitizers see): print it and abort, so
/// libFuzzer saves the input as a crash artifact.
[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "ropejit fuzz finding: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

/// The input as text (it may hold NUL bytes and invalid UTF-8).
inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

/// A private folder from mkdtemp under $TMPDIR, made on first use and removed at exit.
inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/ropejit-fuzz.XXXXXX";
    if (!::mkdtemp(pattern.data())) finding("mkdtemp failed for " + pattern);
    static std::string to_remove;
    to_remove = pattern;
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(to_remove, ec);
    });
    return pattern;
  }();
  return dir;
}

/// Writes `bytes` to `path` (replacing it); aborts when the scratch folder is unwritable.
inline void write_file(const std::string& path, std::string_view bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) finding("cannot write " + path);
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) finding("short write " + path);
  std::fclose(f);
}

/// Reads fixed-size values off the front of the input; past the end every value is 0.
class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  /// The next sizeof(T) bytes as a T (little-endian memcpy), or zero bytes past the end.
  template <class T>
  T take() {
    T value{};
    const size_t n = std::min(sizeof(T), size_ - pos_);
    if (n) std::memcpy(&value, data_ + pos_, n);
    pos_ += n;
    return value;
  }
  /// Bytes not read yet.
  size_t remaining() const { return size_ - pos_; }
  /// The unread bytes.
  std::string_view rest() const { return {reinterpret_cast<const char*>(data_ + pos_), size_ - pos_}; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace ropejit::fuzz
