# Finds the Compute Sanitizer API (sanitizer.h, libsanitizer-public.so) and
# defines the imported target twinscope::sanitizer. Looks in
# TWINSCOPE_SANITIZER_ROOT, then CUDA's compute-sanitizer folder, then the
# PyPI package nvidia-cuda-sanitizer-api (site-packages/nvidia/cu13).
set(_san_hints)
if(TWINSCOPE_SANITIZER_ROOT)
  list(APPEND _san_hints ${TWINSCOPE_SANITIZER_ROOT})
endif()
if(CUDAToolkit_LIBRARY_ROOT)
  list(APPEND _san_hints ${CUDAToolkit_LIBRARY_ROOT}/compute-sanitizer)
endif()
list(APPEND _san_hints /usr/local/cuda/compute-sanitizer)
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_Interpreter_FOUND)
  execute_process(
    COMMAND ${Python3_EXECUTABLE} -c "import nvidia, os; print(';'.join(os.path.join(p, 'cu13') for p in nvidia.__path__))"
    OUTPUT_VARIABLE _san_py OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(_san_py)
    list(APPEND _san_hints ${_san_py})
  endif()
endif()
# nvidia-cuda-sanitizer-api 13.0 keeps include/ and lib/ in nvidia/cu13; 13.5 keeps both in nvidia/cu13/compute-sanitizer.
find_path(SANITIZER_INCLUDE_DIR sanitizer.h HINTS ${_san_hints} PATH_SUFFIXES include compute-sanitizer/include NO_DEFAULT_PATH)
find_library(SANITIZER_LIBRARY NAMES sanitizer-public HINTS ${_san_hints} PATH_SUFFIXES lib lib64 "" compute-sanitizer NO_DEFAULT_PATH)
if(NOT SANITIZER_INCLUDE_DIR OR NOT SANITIZER_LIBRARY)
  message(FATAL_ERROR "Compute Sanitizer API not found (looked in: ${_san_hints}). "
                      "Install it with `pip install nvidia-cuda-sanitizer-api==13.0.85`, "
                      "set -DTWINSCOPE_SANITIZER_ROOT=..., or pass -DTWINSCOPE_WITH_SANITIZER=OFF")
endif()
message(STATUS "Sanitizer API: ${SANITIZER_INCLUDE_DIR} ${SANITIZER_LIBRARY}")
add_library(twinscope::sanitizer SHARED IMPORTED)
set_target_properties(twinscope::sanitizer PROPERTIES
  IMPORTED_LOCATION ${SANITIZER_LIBRARY}
  INTERFACE_INCLUDE_DIRECTORIES ${SANITIZER_INCLUDE_DIR})
