# Install rules: the layout of the Python wheel (pyproject.toml, docs/python.md)
# and of `cmake --install`. Everything goes under one prefix that the wheel
# puts at site-packages/twinscope:
#   bin/twinscope, bin/twinscope_probe_child, bin/twinscope-demo-server, bin/twinscope-demo-client
#   lib/libtwinscope_cupti.so, lib/libtwinscope_guard.so, lib/libtwinscope_blocks.so
# The CLI finds the collectors at bin/../lib and the probe child and the demo
# server beside itself (src/cli/run_child.cpp), as in the build tree. The CUDA
# libraries are never installed: they come from the driver, the toolkit or
# PyPI's nvidia-* packages (site-packages/nvidia/cu13/lib, reached by the
# RUNPATH below from site-packages/twinscope/{bin,lib}; nvidia-cuda-sanitizer-api
# 13.5 moved its library to nvidia/cu13/compute-sanitizer, 13.0 has it in
# nvidia/cu13/lib: both are searched). Component `wheel`.
include(GNUInstallDirs)
set(_twinscope_nvidia_rpath "$ORIGIN/../../nvidia/cu13/lib;$ORIGIN/../../nvidia/cu13/compute-sanitizer")
foreach(t twinscope twinscope_probe_child twinscope-demo-server twinscope-demo-client)
  if(TARGET ${t})
    install(TARGETS ${t} RUNTIME DESTINATION bin COMPONENT wheel)
  endif()
endforeach()
foreach(t twinscope_cupti twinscope_guard twinscope_blocks)
  if(TARGET ${t})
    install(TARGETS ${t} LIBRARY DESTINATION lib COMPONENT wheel)
  endif()
endforeach()
# Where they link a CUDA library (the Sanitizer API, CUPTI, the runtime, cuBLAS):
# PyPI's copy beside the wheel, else the loader's search path as before.
foreach(t twinscope_blocks twinscope_probe_child twinscope-demo-server twinscope-demo-client)
  if(TARGET ${t})
    set_target_properties(${t} PROPERTIES INSTALL_RPATH "${_twinscope_nvidia_rpath}")
  endif()
endforeach()
# The targets the wheel holds, built together (pyproject.toml: build.targets).
add_custom_target(twinscope_wheel)
foreach(t twinscope twinscope_probe_child twinscope-demo-server twinscope-demo-client twinscope_cupti twinscope_guard twinscope_blocks)
  if(TARGET ${t})
    add_dependencies(twinscope_wheel ${t})
  endif()
endforeach()

# The CLI end-to-end tests against an installed copy (scripts/test.sh, the
# wheel step): a test's definition NAME="$<TARGET_FILE:T>" for T an installed
# target (the CLI or a collector) becomes NAME=(getenv("TWINSCOPE_TEST_INSTALLED_T") ?: "<build path>"),
# so with TWINSCOPE_TEST_INSTALLED_twinscope (and _twinscope_cupti, ...) set
# the same test binaries run the installed files instead of the build tree's.
# Those test executables are listed in installed-copy-tests.txt.
function(_twinscope_installed_copy_tests)
  set(_dirs ${PROJECT_SOURCE_DIR})
  set(_tests)
  while(_dirs)
    list(POP_FRONT _dirs _dir)
    get_property(_sub DIRECTORY ${_dir} PROPERTY SUBDIRECTORIES)
    list(APPEND _dirs ${_sub})
    get_property(_targets DIRECTORY ${_dir} PROPERTY BUILDSYSTEM_TARGETS)
    foreach(_t ${_targets})
      get_target_property(_type ${_t} TYPE)
      if(NOT _type STREQUAL "EXECUTABLE")
        continue()
      endif()
      get_target_property(_defs ${_t} COMPILE_DEFINITIONS)
      if(NOT _defs)
        continue()
      endif()
      set(_new)
      set(_changed OFF)
      foreach(_d IN LISTS _defs)
        if(_d MATCHES "^([A-Za-z0-9_]+)=\"\\$<TARGET_FILE:(twinscope|twinscope_cupti|twinscope_guard|twinscope_blocks)>\"$")
          set(_d "${CMAKE_MATCH_1}=(::getenv(\"TWINSCOPE_TEST_INSTALLED_${CMAKE_MATCH_2}\")?:\"$<TARGET_FILE:${CMAKE_MATCH_2}>\")")
          set(_changed ON)
        endif()
        list(APPEND _new "${_d}")
      endforeach()
      if(_changed)
        set_property(TARGET ${_t} PROPERTY COMPILE_DEFINITIONS "${_new}")
        list(APPEND _tests "$<TARGET_FILE:${_t}>")
      endif()
    endforeach()
  endwhile()
  list(JOIN _tests "\n" _lines)
  file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/installed-copy-tests.txt CONTENT "${_lines}\n")
  # What the Python API test (tests/python/test_api.py) runs beside the
  # installed wheel: the fixture writer, and the fake CUPTI with its driver
  # program for a `twinscope record` by the installed collector.
  set(_env)
  foreach(_pair "FIXTURE_WRITER;write_twin_fixture" "CUPTI_DRIVER;cupti_driver" "FAKE_CUPTI;fake_cupti"
        "FAKE_CUPTI135;fake_cupti135")
    list(GET _pair 0 _name)
    list(GET _pair 1 _target)
    if(TARGET ${_target})
      string(APPEND _env "TWINSCOPE_TEST_${_name}=$<TARGET_FILE:${_target}>\n")
    endif()
  endforeach()
  file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/python-test.env CONTENT "${_env}")
endfunction()
if(TWINSCOPE_BUILD_TESTS)  # at the end, once every test target exists
  cmake_language(DEFER DIRECTORY ${PROJECT_SOURCE_DIR} CALL _twinscope_installed_copy_tests)
endif()
