# Sanitizer and fuzzing builds (docs/RELIABILITY.md, "Fuzzing and sanitizers"; CMakePresets.json
# has the `sanitize` and `fuzz` presets). Included from the root CMakeLists.txt before any target is
# defined, because add_compile_options/add_link_options only reach targets created after them.
#   ROPEJIT_SANITIZE=address,undefined  every target compiled and linked with those sanitizers
#   ROPEJIT_FUZZ=ON                      clang only: the library with fuzzer-no-link,address,undefined
#                                        and the libFuzzer targets of tests/fuzz
set(ROPEJIT_SANITIZE "" CACHE STRING "Sanitizers for every target (-fsanitize=...), e.g. address,undefined; empty: none")
option(ROPEJIT_FUZZ "Build the libFuzzer targets in tests/fuzz (clang only; implies address,undefined)" OFF)

set(ROPEJIT_SANITIZERS "")
if(ROPEJIT_SANITIZE)
  string(REPLACE "," ";" ROPEJIT_SANITIZERS "${ROPEJIT_SANITIZE}")
endif()

if(ROPEJIT_FUZZ)
  # libFuzzer ships with clang only (-fsanitize=fuzzer); gcc has no equivalent.
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang" OR NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "ROPEJIT_FUZZ=ON needs clang for C and C++ (libFuzzer); this configure uses "
      "${CMAKE_C_COMPILER_ID} / ${CMAKE_CXX_COMPILER_ID}. Use the preset: cmake --preset fuzz "
      "(or -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 in a fresh build folder).")
  endif()
  # Coverage instrumentation for libFuzzer in every object; the fuzz targets add -fsanitize=fuzzer
  # (the libFuzzer main) when they link (tests/fuzz/CMakeLists.txt).
  list(PREPEND ROPEJIT_SANITIZERS fuzzer-no-link address undefined)
  # ctest reads only the build root's test file, which exists only when the root directory
  # enables testing: this module runs in the root's scope, tests/ may be off.
  enable_testing()
endif()

if(ROPEJIT_SANITIZERS)
  list(REMOVE_DUPLICATES ROPEJIT_SANITIZERS)
  list(JOIN ROPEJIT_SANITIZERS "," _ropejit_sanitize_list)
  message(STATUS "ropejit: sanitizers for every target: ${_ropejit_sanitize_list}")
  # Frame pointers: readable ASan/UBSan stacks; no recover: the first UBSan report fails the test.
  add_compile_options(-fsanitize=${_ropejit_sanitize_list} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${_ropejit_sanitize_list})
  if(CMAKE_C_COMPILER_ID MATCHES "Clang")
    # A C program (tests/c_api) linking the C++ library needs UBSan's C++ half (the vptr
    # handlers), which needs libstdc++'s type_info classes.
    add_link_options("$<$<LINK_LANGUAGE:C>:-fsanitize-link-c++-runtime;-lstdc++>")
  endif()
  unset(_ropejit_sanitize_list)
endif()
