# Writes a C++ source that holds a binary file as a byte array, so the patch
# fatbin travels inside libtwinscope_blocks.so (no file path at run time).
# Usage: cmake -DINPUT=<file> -DOUTPUT=<file.cpp> -DSYMBOL=<name> -P embed_binary.cmake
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" hex_len)
math(EXPR size "${hex_len} / 2")
if(size EQUAL 0)
  message(FATAL_ERROR "embed_binary: ${INPUT} is empty")
endif()
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){32})" "\\1\n" bytes "${bytes}")
file(WRITE "${OUTPUT}.tmp"
  "// Generated from ${INPUT} by embed_binary.cmake. Do not edit.\n"
  "#include <cstddef>\n"
  "namespace twinscope::embedded {\n"
  "alignas(64) extern const unsigned char ${SYMBOL}[] = {\n${bytes}\n};\n"
  "extern const std::size_t ${SYMBOL}_size = ${size};\n"
  "}  // namespace twinscope::embedded\n")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
