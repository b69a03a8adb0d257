# Dependencies point one way (README.md, "Layout"): fails when a part includes a folder it must not.
# Run by ctest (tests/base): cmake -DROOT=<source dir> -P check_layering.cmake
# Each rule: a folder of src/ and the include prefixes its files must not use.
set(_rules
  "base|abi/ format/ launchkey/ nvtx/ cuptilib/ cupti/ guard/ blocks/ probe/ stats/ join/ procs/ views/ twin/ mirror/ cli/"
  "abi|format/ launchkey/ nvtx/ cuptilib/ cupti/ guard/ blocks/ probe/ stats/ join/ procs/ views/ twin/ mirror/ cli/"
  "format|launchkey/ nvtx/ cuptilib/ cupti/ guard/ blocks/ probe/ stats/ join/ procs/ views/ twin/ mirror/ cli/"
  "cuptilib|cupti/ guard/ blocks/ probe/ cli/"
  "guard|cupti/ cuptilib/ blocks/ probe/ cli/"
  "cupti|guard/ blocks/ probe/ cli/"
  "blocks|cupti/ guard/ probe/ cli/"
  "stats|join/ procs/ views/ twin/ mirror/ cli/"
  "join|procs/ views/ twin/ mirror/ cli/"
  "procs|views/ twin/ mirror/ cli/"
  "views|twin/ mirror/ cli/ cupti/ guard/ blocks/ probe/"
  "cli|client/ server/ net/ common/ gpu/")
set(_bad "")
foreach(rule ${_rules})
  string(REPLACE "|" ";" parts "${rule}")
  list(GET parts 0 dir)
  list(GET parts 1 banned)
  string(REPLACE " " ";" banned "${banned}")
  file(GLOB_RECURSE files "${ROOT}/src/${dir}/*.h" "${ROOT}/src/${dir}/*.cpp" "${ROOT}/src/${dir}/*.cu")
  foreach(f ${files})
    file(STRINGS "${f}" includes REGEX "^[ \t]*#[ \t]*include[ \t]+\"")
    foreach(line ${includes})
      string(REGEX REPLACE "^[^\"]*\"([^\"]*)\".*$" "\\1" inc "${line}")
      foreach(b ${banned})
        string(FIND "${inc}" "${b}" at)
        if(at EQUAL 0)
          file(RELATIVE_PATH rel "${ROOT}" "${f}")
          string(APPEND _bad "  ${rel} includes \"${inc}\" (src/${dir} must not include ${b})\n")
        endif()
      endforeach()
    endforeach()
  endforeach()
endforeach()
if(_bad)
  message(FATAL_ERROR "upward or sideways includes (README.md, \"Layout\"):\n${_bad}")
endif()
message(STATUS "layering: every include points one way")
