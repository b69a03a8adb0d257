# The test command's cold build (TWINSCOPE_FAST_BUILD, off by default; scripts/test.sh turns it on): unity
# builds of the product's and the demo's targets, line tables only for debug info, the tests' helpers at -O1, and
# with GCC the test executables' own files at -O0 with one precompiled header shared by all of them (GoogleTest,
# nlohmann/json and the standard headers they pull in: parsed once instead of in each of ~100 test files; the
# files stay one unit each, since test files share helper names freely). Product code stays at the build type's
# optimization, so the launch-path budget and the benchmarks measure what ships. Measured in bench/RESULTS.md
# ("The test command's time"). Off for everyday work: unity builds make incremental builds slower.
option(TWINSCOPE_FAST_BUILD "Build quickly from cold (the test command): unity builds, -g1, tests at -O1" OFF)

# Sources whose file-local names clash with a neighbour's in one unity file: compiled on their own. (A clash is a
# compile error of the unity build, never a silent change: two same-named definitions cannot both be seen.)
set(TWINSCOPE_UNITY_ALONE
    src/format/run_dir.cpp
    src/join/divergence.cpp
    src/join/match.cpp
    src/join/requests.cpp
    src/twin/serve.cpp
    demo/server/schedule.cpp)
# Targets built without unity: the guard declares CUPTI's exports with its own signatures (guard_forwarded.cpp)
# beside files that include cupti.h.
set(TWINSCOPE_UNITY_OFF_TARGETS twinscope_guard)

function(_twinscope_apply_unity)
  twinscope_compiled_targets_below("${PROJECT_SOURCE_DIR}" targets)
  foreach(t IN LISTS targets)
    get_target_property(source_dir ${t} SOURCE_DIR)
    file(RELATIVE_PATH target_dir "${PROJECT_SOURCE_DIR}" "${source_dir}")
    if(t IN_LIST TWINSCOPE_UNITY_OFF_TARGETS OR NOT target_dir MATCHES "^(src|demo)(/|$)")
      continue()
    endif()
    set_target_properties(${t} PROPERTIES UNITY_BUILD ON)
    get_target_property(sources ${t} SOURCES)
    foreach(s IN LISTS sources)
      if(s MATCHES "\\$<")
        continue()
      endif()
      set(abs "${s}")
      if(NOT IS_ABSOLUTE "${abs}")
        set(abs "${source_dir}/${s}")
      endif()
      file(RELATIVE_PATH rel "${PROJECT_SOURCE_DIR}" "${abs}")
      if(rel IN_LIST TWINSCOPE_UNITY_ALONE)
        set_source_files_properties(${abs} TARGET_DIRECTORY ${t} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
      endif()
    endforeach()
  endforeach()
endfunction()

# Every test executable that links GoogleTest reuses the precompiled header of twinscope_test_pch
# (tests/CMakeLists.txt) and compiles its own files at -O0 like that header: GCC takes a precompiled header only
# when the optimization level (and -fPIE) is the one it was made with, and otherwise parses the headers as usual
# (slower, never wrong). The test fakes and the launch-path driver are not GoogleTest executables: they keep -O1.
function(_twinscope_apply_test_pch)
  if(NOT TARGET twinscope_test_pch)
    return()
  endif()
  twinscope_compiled_targets_below("${PROJECT_SOURCE_DIR}/tests" targets)
  set(n 0)
  foreach(t IN LISTS targets)
    get_target_property(type ${t} TYPE)
    get_target_property(libs ${t} LINK_LIBRARIES)
    if(NOT type STREQUAL "EXECUTABLE" OR t STREQUAL "twinscope_test_pch" OR NOT "${libs}" MATCHES "GTest::")
      continue()
    endif()
    target_compile_options(${t} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-O0>)
    target_precompile_headers(${t} REUSE_FROM twinscope_test_pch)
    math(EXPR n "${n} + 1")
  endforeach()
  message(STATUS "Fast cold build: ${n} test executables share one precompiled header (twinscope_test_pch)")
endfunction()

if(TWINSCOPE_FAST_BUILD)
  add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-g1>)  # after the build type's -g: line tables are enough here
  cmake_language(DEFER DIRECTORY ${PROJECT_SOURCE_DIR} CALL _twinscope_apply_unity)
  cmake_language(DEFER DIRECTORY ${PROJECT_SOURCE_DIR} CALL _twinscope_apply_test_pch)
  message(STATUS "Fast cold build (TWINSCOPE_FAST_BUILD): unity builds, -g1, tests at -O1 (GoogleTest files -O0, one PCH)")
endif()
