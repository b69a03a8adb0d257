# Test parts that a configuration cannot build: twinscope_test_skipped(PART WHY [CHOSEN]).
# A missing prerequisite fails configure under CI=true (in the environment at configure time), as a
# missing nvcc does (tests/blocks): a green CI run must have run every test. Elsewhere it is a warning,
# and the part is listed in BUILD/skipped-tests.txt, which scripts/test.sh prints with its result.
# CHOSEN: the part is off by an option the user set (e.g. -DTWINSCOPE_WITH_MIRROR=OFF): listed, never fatal.
# The fuzz build (TWINSCOPE_FUZZ) turns parts off on purpose and lists nothing.
function(twinscope_test_skipped part why)
  if(NOT TWINSCOPE_BUILD_TESTS OR TWINSCOPE_FUZZ)
    return()
  endif()
  if(NOT "${ARGN}" STREQUAL "CHOSEN" AND "$ENV{CI}" MATCHES "^(true|TRUE|1)$")
    message(FATAL_ERROR "${part}: NOT built (${why}). CI=true: these tests must run in CI.")
  endif()
  message(WARNING "${part}: NOT built (${why}); ctest will not run it.")
  set_property(GLOBAL APPEND PROPERTY TWINSCOPE_SKIPPED_TESTS "${part}: ${why}")
endfunction()

# Writes BUILD/skipped-tests.txt (empty when nothing was skipped) once every folder is configured.
function(_twinscope_write_skipped_tests)
  get_property(parts GLOBAL PROPERTY TWINSCOPE_SKIPPED_TESTS)
  set(text "")
  foreach(p IN LISTS parts)
    string(APPEND text "${p}\n")
  endforeach()
  file(WRITE ${CMAKE_BINARY_DIR}/skipped-tests.txt "${text}")
endfunction()
cmake_language(DEFER DIRECTORY ${PROJECT_SOURCE_DIR} CALL _twinscope_write_skipped_tests)
