# twinscope_targets_below(DIR OUT): every target defined in DIR and the folders below it (for the build-wide
# settings applied at the end of configure: cmake/TwinscopePch.cmake, cmake/TwinscopeFastBuild.cmake).
function(twinscope_targets_below dir out)
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(s IN LISTS subdirs)
    twinscope_targets_below("${s}" sub)
    list(APPEND targets ${sub})
  endforeach()
  set(${out} "${targets}" PARENT_SCOPE)
endfunction()
