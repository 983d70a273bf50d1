#include <gtest/gtest.h>

#include "core/FrameClassifier.h"
#include "core/Protocol.h"
#include "core/Units.h"
#include "trace/TraceModel.h"

using namespace memtool::core;

TEST(Units, FormatsIec) {
    EXPECT_EQ(formatBytes(0), "0 B");
    EXPECT_EQ(formatBytes(1023), "1023 B");
    EXPECT_EQ(formatBytes(1024), "1.00 KiB");
    EXPECT_EQ(formatBytes(1536), "1.50 KiB");
    EXPECT_EQ(formatBytes(3000000), "2.86 MiB");
    EXPECT_EQ(formatBytes(12ull << 20), "12.00 MiB");
    EXPECT_EQ(formatBytes(5ull << 30), "5.00 GiB");
    EXPECT_EQ(formatBytesDelta(-1024), "-1.00 KiB");
    EXPECT_EQ(formatBytesDelta(1), "+1 B");
    EXPECT_EQ(formatBytesDelta(0), "0 B");
}

TEST(Units, ExactAndSiBytes) {
    EXPECT_EQ(formatBytes(40000, ByteUnits::Exact), "40,000 B");
    EXPECT_EQ(formatBytes(999, ByteUnits::Exact), "999 B");
    EXPECT_EQ(formatBytes(1000, ByteUnits::Exact), "1,000 B");
    EXPECT_EQ(formatBytes(11534336, ByteUnits::Exact), "11,534,336 B");
    EXPECT_EQ(formatBytes(UINT64_MAX, ByteUnits::Exact), "18,446,744,073,709,551,615 B");
    EXPECT_EQ(formatBytes(40000, ByteUnits::Si), "40.00 kB");
    EXPECT_EQ(formatBytes(999, ByteUnits::Si), "999 B");
    EXPECT_EQ(formatBytes(2500000000, ByteUnits::Si), "2.50 GB");
    EXPECT_EQ(formatBytes(40000, ByteUnits::Iec), "39.06 KiB");
    EXPECT_EQ(parseByteUnits("exact"), ByteUnits::Exact);
    EXPECT_EQ(parseByteUnits("bytes"), std::nullopt);
}

TEST(Units, ParsesSizes) {
    EXPECT_EQ(parseSize("123456"), 123456u);
    EXPECT_EQ(parseSize("512MiB"), 512ull << 20);
    EXPECT_EQ(parseSize("2GB"), 2000000000u);
    EXPECT_EQ(parseSize("1.5GiB"), 3ull << 29);
    EXPECT_EQ(parseSize("10KB"), 10000u);
    EXPECT_EQ(parseSize("7B"), 7u);
    EXPECT_EQ(parseSize("7.0"), 7u);
    EXPECT_EQ(parseSize("1.5KB"), 1500u);
    for (const char* bad : {"", "MiB", "1.5.2GB", "12 MiB", "-5", "5XB", ".5GB", "5.",
                            "99999999999999999999", "1.5", "1.5B", "0.001"})
        EXPECT_FALSE(parseSize(bad).has_value()) << bad;
}

TEST(Units, DeviceNames) {
    EXPECT_EQ(deviceName(kDeviceCpu), "cpu");
    EXPECT_EQ(deviceName(kDeviceCudaBase), "cuda:0");
    EXPECT_EQ(deviceName(kDeviceCudaBase + 3), "cuda:3");
}

TEST(FrameClassifier, TellsUserCodeFromLibraries) {
    EXPECT_FALSE(isLibraryPythonFile("/home/me/train.py"));
    EXPECT_TRUE(isLibraryPythonFile("/usr/lib/python3.11/threading.py"));
    EXPECT_TRUE(isLibraryPythonFile("/usr/lib/python3/dist-packages/torch/nn/modules/linear.py"));
    EXPECT_TRUE(isLibraryPythonFile("/venv/lib/python3.12/site-packages/torch/_tensor.py"));
    EXPECT_TRUE(isLibraryPythonFile("<frozen importlib._bootstrap>"));
    // A Python installation's lib/python3[.N]/, and nothing that only looks like one.
    EXPECT_TRUE(inPythonLibDir("/usr/lib64/python3.9/os.py"));
    EXPECT_TRUE(inPythonLibDir("/opt/py/lib/python3/x.py"));
    EXPECT_TRUE(inPythonLibDir("/home/me/.pyenv/versions/3.13.0/lib/python3.13/lib-dynload/a.so"));
    EXPECT_TRUE(inPythonLibDir("/libs/lib/lib/python3.12/x.py"));  // a later /lib matches
    EXPECT_FALSE(inPythonLibDir("/usr/lib/python3.12"));           // a directory's name only
    EXPECT_FALSE(inPythonLibDir("/usr/lib/python3./x.py"));
    EXPECT_FALSE(inPythonLibDir("/usr/lib/python3.x/x.py"));
    EXPECT_FALSE(inPythonLibDir("/usr/lib/python35/x.py"));
    EXPECT_FALSE(inPythonLibDir("/usr/lib6/python3/x.py"));
    EXPECT_FALSE(inPythonLibDir("/usr/library/python3/x.py"));
    EXPECT_FALSE(inPythonLibDir("/home/me/python3.11/x.py"));
    EXPECT_FALSE(isLibraryModule("/home/me/build/bin/libtorch_sample"));
    EXPECT_TRUE(isLibraryModule("/usr/lib/x86_64-linux-gnu/libc10.so.1.13"));
    EXPECT_TRUE(isLibraryModule("/usr/bin/python3.11"));
    // NVIDIA's libraries outside the system directories: a container's driver
    // mount (where the H100 of the GPU checks has libcuda.so.1), pip's wheels.
    EXPECT_TRUE(isLibraryModule("/usr/local/nvidia/lib64/libcuda.so.1"));
    EXPECT_TRUE(isLibraryModule("/opt/drivers/580/libcuda.so.1"));
    EXPECT_TRUE(isLibraryModule("/opt/cuda-13/lib64/libcupti.so.13"));
    EXPECT_TRUE(isLibraryModule("/home/me/venv/nvidia/cu13/lib/libcudart.so.13"));
    EXPECT_FALSE(isLibraryModule("/home/me/build/libcudaops.so"));
    EXPECT_TRUE(isLibraryModule("/opt/venv/lib/python3.12/site-packages/torch/lib/libc10.so"));
    EXPECT_TRUE(
        isLibraryModule("/root/.pyenv/versions/3.12.1/lib/python3.12/lib-dynload/"
                        "_ctypes.cpython-312-x86_64-linux-gnu.so"));
    EXPECT_TRUE(isLibraryModule("/work/build/lib/libmemtool_cupti.so"));
    EXPECT_TRUE(isLibrarySource("/usr/include/torch/csrc/api/include/torch/nn/module.h"));
    EXPECT_FALSE(isLibrarySource("/home/me/src/model.cpp"));
    EXPECT_FALSE(isLibrarySource(""));
}

// Headers whose code lands in the user's binary, inlined or as a template's copy.
TEST(FrameClassifier, HeadersOfLibrariesAreLibraryCode) {
    EXPECT_TRUE(isLibrarySource("/usr/include/c++/12/bits/shared_ptr.h"));
    EXPECT_TRUE(isLibrarySource("/usr/include/ATen/ops/empty.h"));
    EXPECT_TRUE(isLibrarySource("/usr/lib/gcc/x86_64-linux-gnu/12/include/stddef.h"));
    EXPECT_TRUE(isLibrarySource("/opt/gcc-13/include/c++/13/bits/unique_ptr.h"));
    EXPECT_TRUE(isLibrarySource("/opt/libtorch/include/ATen/core/TensorBody.h"));
    EXPECT_TRUE(isLibrarySource("/opt/libtorch/include/c10/util/intrusive_ptr.h"));
    EXPECT_TRUE(
        isLibrarySource("/opt/libtorch/include/torch/csrc/api/include/torch/nn/modules/linear.h"));
    EXPECT_TRUE(
        isLibrarySource("/venv/lib/python3.12/site-packages/torch/include/ATen/ops/empty.h"));
    EXPECT_FALSE(isLibrarySource("/home/me/mlp/src/Net.h"));
    EXPECT_FALSE(isLibrarySource("/home/me/torch-mlp/mlp.cpp"));
}

#include "tests/TestFrames.h"
#include "trace/HotspotSelection.h"

TEST(Report, ShortFrames) {
    using memtool::reporters::shortFrame;
    using memtool::testing::nativeFrame;
    using memtool::testing::pythonFrame;
    EXPECT_EQ(shortFrame(pythonFrame("inner", "/home/me/train.py", 11)), "inner (train.py:11)");
    EXPECT_EQ(shortFrame(nativeFrame("at::_ops::empty::call(c10::ArrayRef<long>, bool)",
                                     "/usr/lib/libtorch_cpu.so.1.13")),
              "at::_ops::empty::call (libtorch_cpu.so.1.13)");
    EXPECT_EQ(
        shortFrame(nativeFrame("Functor::operator()(int) const", "/src/app", "/src/a.cpp", 3)),
        "Functor::operator() (a.cpp:3)");
    EXPECT_EQ(shortFrame(nativeFrame("", "/usr/lib/libtorch_python.so", "", 0, 0x48a99c)),
              "?? (libtorch_python.so+0x48a99c)");
}

// Names as c++filt and the demangler give them (libtorch_cpu.so 1.13's symbols,
// and g++ 12's for a lambda, std::function and an anonymous namespace): the short
// name loses the parameters and the return type, and nothing of a template
// argument, however many parentheses and spaces it holds.
TEST(Report, ShortNamesNeverCutInsideTemplateArguments) {
    using memtool::reporters::shortFunctionName;
    EXPECT_EQ(shortFunctionName("std::_Function_handler<void (int), use()::{lambda(int)#1}>::"
                                "_M_invoke(std::_Any_data const&, int&&)"),
              "std::_Function_handler<void (int), use()::{lambda(int)#1}>::_M_invoke");
    EXPECT_EQ(shortFunctionName("use()::{lambda(int)#1}::operator()(int) const"),
              "use()::{lambda(int)#1}::operator()");
    EXPECT_EQ(shortFunctionName("std::vector<std::function<void (int)>, std::allocator<std::"
                                "function<void (int)> > > (anonymous namespace)::fill<std::"
                                "function<void (int)> >(long)"),
              "(anonymous namespace)::fill<std::function<void (int)> >");
    EXPECT_EQ(shortFunctionName(
                  "void std::vector<std::function<void (c10::ivalue::Future&)>, "
                  "std::allocator<std::function<void (c10::ivalue::Future&)> > >::emplace_back<"
                  "std::function<void (c10::ivalue::Future&)> >(std::function<void "
                  "(c10::ivalue::Future&)>&&)"),
              "std::vector<...>::emplace_back<...>");  // each list over 40 characters
    EXPECT_EQ(shortFunctionName("at::Tensor at::detail::tensor_cpu<signed char>(c10::ArrayRef<"
                                "signed char>, c10::TensorOptions const&)"),
              "at::detail::tensor_cpu<signed char>");
    EXPECT_EQ(shortFunctionName("bool operator< <std::function<void (int)> >(Net const&, "
                                "std::vector<std::function<void (int)>, std::allocator<std::"
                                "function<void (int)> > > const&)"),
              "operator< <std::function<void (int)> >");
    EXPECT_EQ(shortFunctionName("torch::jit::tensorexpr::ExprHandle::operator<(torch::jit::"
                                "tensorexpr::ExprHandle const&) const"),
              "torch::jit::tensorexpr::ExprHandle::operator<");
    EXPECT_EQ(shortFunctionName("std::type_info::operator==(std::type_info const&) const"),
              "std::type_info::operator==");
    EXPECT_EQ(shortFunctionName("torch::data::samplers::BatchSize::operator unsigned long() const"),
              "torch::data::samplers::BatchSize::operator unsigned long");
    EXPECT_EQ(shortFunctionName("operator new(unsigned long)"), "operator new");
    EXPECT_EQ(shortFunctionName("(anonymous namespace)::Holder::Holder(long)"),
              "(anonymous namespace)::Holder::Holder");
    // A kernel wrapper of a backward pass on the GPU (torch 2.11), a thousand
    // characters whole; short lists stay, operators' symbols are no brackets.
    const std::string sig =
        "at::Tensor (c10::DispatchKeySet, at::Tensor const&, c10::Scalar const&)";
    EXPECT_EQ(shortFunctionName("c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::"
                                "WrapFunctionIntoFunctor_<c10::CompileTimeFunctionPointer<" +
                                sig +
                                ", &torch::autograd::VariableType::(anonymous namespace)::"
                                "div_Scalar>, at::Tensor, c10::guts::typelist::typelist<c10::"
                                "DispatchKeySet, at::Tensor const&, c10::Scalar const&> >, " +
                                sig + ">::call(c10::OperatorKernel*, c10::DispatchKeySet)"),
              "c10::impl::wrap_kernel_functor_unboxed_<...>::call");
    EXPECT_EQ(shortFunctionName("std::map<int, std::vector<long> >::operator[](int const&)"),
              "std::map<int, std::vector<long> >::operator[]");
    EXPECT_EQ(shortFunctionName("ns::Cmp<ns::Pair<int, int> >::operator<=(ns::Cmp<ns::Pair<int, "
                                "int> > const&) const"),
              "ns::Cmp<ns::Pair<int, int> >::operator<=");
    EXPECT_EQ(shortFunctionName("ns::Cmp<ns::Pair<int, int> >::operator->() const"),
              "ns::Cmp<ns::Pair<int, int> >::operator->");
    EXPECT_EQ(shortFunctionName("ns::Box<std::array<char, 4096ul>, std::unordered_map<long, "
                                "double> >::get<std::pair<long, long> >()"),
              "ns::Box<...>::get<std::pair<long, long> >");
    EXPECT_EQ(shortFunctionName("broken<a<b"), "broken<a<b");  // unbalanced: left as it is
    // Nothing to drop: left whole.
    EXPECT_EQ(shortFunctionName("c10::alloc_cpu"), "c10::alloc_cpu");
    EXPECT_EQ(shortFunctionName("main"), "main");
}
