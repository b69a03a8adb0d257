// Builds the precompiled header that the test executables of the fast cold build share (tests/CMakeLists.txt).
int main() { return 0; }
