# twinscope_compiled_targets_below(DIR OUT): every target defined in DIR and the folders below it that compiles
# sources (libraries and executables; not custom or interface targets), for the build-wide settings applied at
# the end of configure: cmake/TwinscopePch.cmake, cmake/TwinscopeFastBuild.cmake.
function(twinscope_compiled_targets_below dir out)
  get_property(all DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  set(targets)
  foreach(t IN LISTS all)
    get_target_property(type ${t} TYPE)
    if(type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$")
      list(APPEND targets ${t})
    endif()
  endforeach()
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(s IN LISTS subdirs)
    twinscope_compiled_targets_below("${s}" sub)
    list(APPEND targets ${sub})
  endforeach()
  set(${out} "${targets}" PARENT_SCOPE)
endfunction()
