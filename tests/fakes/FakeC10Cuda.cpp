// Stands in for PyTorch's libc10_cuda.so: only its name and its GNU build id
// (fixed at link time, see tests/CMakeLists.txt) matter to the torch bridge loader.
extern "C" int fake_c10_cuda_present() { return 1; }
