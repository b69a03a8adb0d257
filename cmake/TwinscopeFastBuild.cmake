# The test command's cold build (TWINSCOPE_FAST_BUILD, off by default; scripts/test.sh turns it on): what the tests
# need, compiled with as little CPU as still tests what ships (bench/RESULTS.md, "The test command's time"):
# - unity builds of the product's and the demo's targets, and of each GoogleTest executable (its test files in one
#   unit: a helper two test files both define is a compile error there, so shared helpers live in the tests'
#   headers, e.g. tests/join/join_test_util.h);
# - line tables only for debug info;
# - product code at -O1, except the collector the launch-path budget measures (twinscope_cupti and everything it
#   links), which keeps the build type's -O2 so the budget counts the instructions that ship;
# - the tests' helpers at -O1; with GCC the GoogleTest executables' own files at -O0 -g0 with one precompiled header
#   shared by all of them (GoogleTest, nlohmann/json and the standard headers they pull in).
# Off for everyday work: unity builds make incremental builds slower.
option(TWINSCOPE_FAST_BUILD "Build quickly from cold (the test command): unity builds, -g1, -O1 but the collector" OFF)

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

# OUT: `target` and every target it links, directly or through other targets (generator expressions such as
# $<LINK_LIBRARY:WHOLE_ARCHIVE,lib> included).
function(_twinscope_link_closure target out)
  set(seen ${target})
  set(todo ${target})
  while(todo)
    list(POP_FRONT todo t)
    get_target_property(libs ${t} LINK_LIBRARIES)
    get_target_property(ilibs ${t} INTERFACE_LINK_LIBRARIES)
    foreach(l IN LISTS libs ilibs)
      string(REGEX MATCHALL "[A-Za-z0-9_:.+-]+" names "${l}")
      foreach(n IN LISTS names)
        if(TARGET ${n} AND NOT n IN_LIST seen)
          get_target_property(aliased ${n} ALIASED_TARGET)
          if(aliased)
            set(n ${aliased})
          endif()
          list(APPEND seen ${n})
          list(APPEND todo ${n})
        endif()
      endforeach()
    endforeach()
  endwhile()
  set(${out} "${seen}" PARENT_SCOPE)
endfunction()

function(_twinscope_apply_unity)
  set(keep_opt)
  if(TARGET twinscope_cupti)
    _twinscope_link_closure(twinscope_cupti keep_opt)
  endif()
  set(n_o1 0)
  twinscope_compiled_targets_below("${PROJECT_SOURCE_DIR}" targets)
  foreach(t IN LISTS targets)
    get_target_property(source_dir ${t} SOURCE_DIR)
    file(RELATIVE_PATH target_dir "${PROJECT_SOURCE_DIR}" "${source_dir}")
    if(t IN_LIST TWINSCOPE_UNITY_OFF_TARGETS OR NOT target_dir MATCHES "^(src|demo)(/|$)")
      continue()
    endif()
    set_target_properties(${t} PROPERTIES UNITY_BUILD ON)
    if(NOT t IN_LIST keep_opt)
      target_compile_options(${t} PRIVATE "$<$<COMPILE_LANGUAGE:C,CXX>:-O1>")  # after the build type's -O2
      math(EXPR n_o1 "${n_o1} + 1")
    endif()
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
  list(FILTER keep_opt INCLUDE REGEX "^twinscope")
  message(STATUS "Fast cold build: ${n_o1} product targets at -O1; at the build type's optimization: ${keep_opt}")
endfunction()

# Every test executable that links GoogleTest is one unity file and reuses the precompiled header of twinscope_test_pch
# (tests/CMakeLists.txt) and compiles its own files at -O0 like that header: GCC takes a precompiled header only
# when the optimization level (and -fPIE) is the one it was made with, and otherwise parses the headers as usual
# (slower, never wrong). No debug info there either (-g0: a failed expectation names its file and line itself;
# about 10% of a test file's compile time). One unity file per executable: the headers and the inline code its test
# files share are compiled once, not once per file (about 45% less CPU for the tests). The test fakes and the
# launch-path driver are not GoogleTest executables: they keep -O1 and their files.
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
    target_compile_options(${t} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:-O0;-g0>")
    target_precompile_headers(${t} REUSE_FROM twinscope_test_pch)
    set_target_properties(${t} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 0)
    math(EXPR n "${n} + 1")
  endforeach()
  message(STATUS "Fast cold build: ${n} test executables share one precompiled header (twinscope_test_pch)")
endfunction()

if(TWINSCOPE_FAST_BUILD)
  add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-g1>)  # after the build type's -g: line tables are enough here
  cmake_language(DEFER DIRECTORY ${PROJECT_SOURCE_DIR} CALL _twinscope_apply_unity)
  cmake_language(DEFER DIRECTORY ${PROJECT_SOURCE_DIR} CALL _twinscope_apply_test_pch)
  message(STATUS "Fast cold build (TWINSCOPE_FAST_BUILD): unity builds, -g1, -O1 but the collector (GoogleTest files -O0, one PCH)")
endif()
