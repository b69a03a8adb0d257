// A library whose only purpose is its file name, libcupti.so.13: preloaded by
// blocks_e2e_test so the block probe finds a libcupti in /proc/self/maps, as
// in a process that uses CUPTI. It defines no CUPTI function.
extern "C" int twinscope_cupti_stand_in() { return 13; }
