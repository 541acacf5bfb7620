# cmake -DWORK_DIR=<folder> -P check_tier_declarations.cmake: cmake/RopejitTestTiers.cmake refuses
# each bad declaration with a message naming it, and derives the filters from good ones.
cmake_minimum_required(VERSION 3.25)
set(tiers_module ${CMAKE_CURRENT_LIST_DIR}/../../cmake/RopejitTestTiers.cmake)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
file(WRITE ${WORK_DIR}/run.cmake "cmake_minimum_required(VERSION 3.25)\ninclude(${tiers_module})\n"
     "ropejit_test_tier_filters(\"\${FILES}\")\n"
     "message(\"unit=\${ROPEJIT_TIER_unit}|compile=\${ROPEJIT_TIER_compile}|conformance=\${ROPEJIT_TIER_conformance}|gpu=\${ROPEJIT_TIER_gpu}|sanitized compile=\${ROPEJIT_SANITIZED_compile}\")\n")

# Runs the module on files given as name=text (no semicolons: a CMake list); `expected` must be in its output.
function(expect_output case expected)
  set(paths)
  foreach(pair IN LISTS ARGN)
    string(REGEX MATCH "^([^=]+)=(.*)$" _ "${pair}")
    file(WRITE ${WORK_DIR}/${case}/${CMAKE_MATCH_1} "${CMAKE_MATCH_2}")
    list(APPEND paths ${WORK_DIR}/${case}/${CMAKE_MATCH_1})
  endforeach()
  execute_process(COMMAND ${CMAKE_COMMAND} "-DFILES=${paths}" -P ${WORK_DIR}/run.cmake
                  OUTPUT_VARIABLE out ERROR_VARIABLE out)
  string(REGEX REPLACE "[ \n]+" " " out "${out}")
  string(FIND "${out}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${case}: expected '${expected}' in:\n${out}")
  endif()
  message(STATUS "${case}: ok")
endfunction()

expect_output(no_declaration "test_a.cpp declares no test tier" "test_a.cpp=// about\nTEST(A, X) {}\n")
expect_output(unknown_tier "tier 'fast' in '// ropejit-tier: fast' is none of: unit, compile, conformance, gpu"
              "test_a.cpp=// ropejit-tier: fast\nTEST(A, X) {}\n")
expect_output(two_file_tiers "two '// ropejit-tier: <tier>' lines"
              "test_a.cpp=// ropejit-tier: unit\n// ropejit-tier: compile\nTEST(A, X) {}\n")
expect_output(stale_suite "names suite B, which the file does not define"
              "test_a.cpp=// ropejit-tier: unit\n// ropejit-tier: compile B\nTEST(A, X) {}\n")
expect_output(split_test_line "as TEST(Suite, Name) on one line" "test_a.cpp=// ropejit-tier: unit\nTEST(\n  A, X) {}\n")
expect_output(suite_in_two_tiers "suite A is in tier unit (tests/test_a.cpp) and compile (tests/test_b.cpp)"
              "test_a.cpp=// ropejit-tier: unit\nTEST(A, X) {}\n" "test_b.cpp=// ropejit-tier: compile\nTEST(A, Y) {}\n")
expect_output(sanitized_whole_tier "the sanitizer tier runs all of unit already"
              "test_a.cpp=// ropejit-tier: unit+sanitize\nTEST(A, X) {}\n")
expect_output(unknown_flag "tier 'compile+fast' in '// ropejit-tier: compile+fast' is none of"
              "test_a.cpp=// ropejit-tier: compile+fast\nTEST(A, X) {}\n")
expect_output(sanitized_suites "compile=C.*:S.*:F.*|conformance=|gpu=|sanitized compile=S.*:F.*"
              "test_a.cpp=// ropejit-tier: compile\n// ropejit-tier: compile+sanitize S\nTEST(C, X) {}\nTEST(S, X) {}\n"
              "test_b.cpp=// ropejit-tier: compile+sanitize\nTEST(F, X) {}\n")
expect_output(filters
              "unit=-C.*:Backend/P.*/host:Golden/G.*:Backend/P.*/cuda|compile=C.*|conformance=Backend/P.*/host:Golden/G.*|gpu=Backend/P.*/cuda|sanitized compile= "
              "test_a.cpp=// ropejit-tier: conformance\n// ropejit-tier: unit U\n// ropejit-tier: compile C\nTEST(U, X) {}\nTEST(C, X) {}\nTEST_P(P, X) {}\nINSTANTIATE_TEST_SUITE_P(Backend, P, v)\nTEST_P(G, X) {}\nINSTANTIATE_TEST_SUITE_P(Golden, G, v)\n")
