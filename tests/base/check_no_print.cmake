# The models print nothing (README.md, "Layout"; issue 32 part 6): fails when a file of src/format, src/stats,
# src/join or src/procs calls printf, fprintf, fputs or puts or writes to std::cout or std::cerr (snprintf into
# a buffer is allowed). Text views live in src/views. Run by ctest (tests/base):
#   cmake -DROOT=<source dir> -P check_no_print.cmake
set(_dirs format stats join procs)
set(_call "(^|[^A-Za-z0-9_])(printf|fprintf|fputs|puts)[ \t]*\\(")
set(_stream "std::(cout|cerr)([^A-Za-z0-9_]|$)")
set(_bad "")
foreach(dir ${_dirs})
  file(GLOB_RECURSE files "${ROOT}/src/${dir}/*.h" "${ROOT}/src/${dir}/*.cpp" "${ROOT}/src/${dir}/*.cu")
  foreach(f ${files})
    file(STRINGS "${f}" lines)
    set(n 0)
    foreach(line IN LISTS lines)
      math(EXPR n "${n} + 1")
      string(REGEX REPLACE "//.*$" "" code "${line}")  # a comment may name them
      if(code MATCHES "${_call}" OR code MATCHES "${_stream}")
        file(RELATIVE_PATH rel "${ROOT}" "${f}")
        string(STRIP "${line}" shown)
        string(APPEND _bad "  ${rel}:${n}: ${shown}\n")
      endif()
    endforeach()
  endforeach()
endforeach()
if(_bad)
  message(FATAL_ERROR "the models print (src/format, src/stats, src/join and src/procs compute; their text views "
                      "belong in src/views):\n${_bad}")
endif()
message(STATUS "no model prints: src/format, src/stats, src/join and src/procs write no text")
