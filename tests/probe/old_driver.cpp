// A driver library for the no-GPU check's test: one device, but a driver for CUDA 12.4 only (too old for
// the cu13 wheels twinscope uses).
extern "C" __attribute__((visibility("default"))) int cuInit(unsigned) { return 0; }
extern "C" __attribute__((visibility("default"))) int cuDriverGetVersion(int* v) {
  *v = 12040;
  return 0;
}
extern "C" __attribute__((visibility("default"))) int cuDeviceGetCount(int* n) {
  *n = 1;
  return 0;
}
