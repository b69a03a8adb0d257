# Cross-collector launch keys: the same script under the fake Sanitizer (block
# probe) and under the fake CUPTI (CUPTI collector) must give identical keys.
# Defined at the end of tests/, once tests/cupti has added the fake CUPTI.
function(_twinscope_blocks_cross_keys)
  if(NOT (TARGET twinscope_cupti AND TARGET fake_cupti AND TARGET fake_cuda AND TARGET fakesan_app))
    message(STATUS "tests/blocks: cross_keys_test not built (needs the CUPTI collector and its fake)")
    return()
  endif()
  set(dir ${PROJECT_SOURCE_DIR}/tests/blocks)
  add_executable(cross_keys_cupti_app ${dir}/cross_keys_cupti_app.cpp)
  target_include_directories(cross_keys_cupti_app PRIVATE ${NVTX3_INCLUDE_DIR})
  target_link_libraries(cross_keys_cupti_app PRIVATE fake_cupti fake_cuda ${CMAKE_DL_LIBS})
  add_executable(cross_keys_test ${dir}/cross_keys_test.cpp)
  target_link_libraries(cross_keys_test PRIVATE twinscope_format twinscope_launchkey GTest::gtest_main)
  add_dependencies(cross_keys_test cross_keys_cupti_app fakesan_app twinscope_cupti twinscope_blocks blocks_test_cubins)
  target_compile_definitions(cross_keys_test PRIVATE
    TWINSCOPE_TEST_FAKESAN_APP="$<TARGET_FILE:fakesan_app>"
    TWINSCOPE_TEST_CUPTI_APP="$<TARGET_FILE:cross_keys_cupti_app>"
    TWINSCOPE_TEST_BLOCKS_LIB="$<TARGET_FILE:twinscope_blocks>"
    TWINSCOPE_TEST_CUPTI_LIB="$<TARGET_FILE:twinscope_cupti>"
    TWINSCOPE_TEST_FAKE_CUPTI_DIR="${FAKE_CUPTI_LIB_DIR}"
    TWINSCOPE_TEST_TARGET_CUBIN="${CMAKE_BINARY_DIR}/tests/blocks/target_kernels.cubin"
    TWINSCOPE_TEST_OTHER_CUBIN="${CMAKE_BINARY_DIR}/tests/blocks/other_kernels.cubin"
    TWINSCOPE_TEST_WORKDIR="${CMAKE_BINARY_DIR}/tests/blocks/cross_keys")
  gtest_discover_tests(cross_keys_test)
endfunction()
cmake_language(DEFER DIRECTORY ${PROJECT_SOURCE_DIR}/tests CALL _twinscope_blocks_cross_keys)
