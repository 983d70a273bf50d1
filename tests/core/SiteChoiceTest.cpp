#include <gtest/gtest.h>

#include "core/SiteChoice.h"

using namespace memtool::core;

namespace {

Frame py(const std::string& function, bool user = false) {
    Frame f;
    f.kind = FrameKind::Python;
    f.function = function;
    f.file = user ? "/home/me/train.py" : "/usr/lib/python3/dist-packages/torch/x.py";
    f.line = 7;
    f.user = user;
    return f;
}

Frame native(const std::string& function, const std::string& module = "/usr/lib/libtorch_cpu.so") {
    Frame f;
    f.function = function;
    f.module = module;
    return f;
}

// train() -> optimizer wrappers -> Adam.step -> aten::zeros_like -> the allocator.
std::vector<Frame> adamStack() {
    return {native("c10::alloc_cpu(unsigned long)", "/usr/lib/libc10.so"),
            native("at::detail::empty_strided_generic(c10::ArrayRef<long>)"),
            native("at::_ops::zeros_like::call(at::Tensor const&)"),
            native("", "/usr/lib/libtorch_python.so"),
            py("Adam.step"),
            py("_use_grad_for_differentiable.<locals>._use_grad"),
            py("Optimizer._hook_for_profile.<locals>.profile_hook_step.<locals>.wrapper"),
            py("train", true),
            py("<module>", true)};
}

}  // namespace

TEST(SiteChoice, WrappersPassCallsOn) {
    EXPECT_TRUE(isPassThroughFrame(py("Module._call_impl")));
    EXPECT_TRUE(isPassThroughFrame(py("kwonly_to_pos_or_kw.<locals>.wrapper")));
    EXPECT_TRUE(isPassThroughFrame(
        py("handle_legacy_interface.<locals>.outer_wrapper.<locals>.inner_wrapper")));
    EXPECT_FALSE(isPassThroughFrame(py("unwrapper_of_things")));
    EXPECT_TRUE(isPassThroughFrame(native("", "/usr/lib/libtorch_python.so")));
    EXPECT_FALSE(isPassThroughFrame(py("Adam.step")));
    EXPECT_FALSE(isPassThroughFrame(py("wrapper", true)));  // the user's own code always shows
    EXPECT_FALSE(isPassThroughFrame(native("at::native::linear(at::Tensor const&)")));
}

TEST(SiteChoice, TorchOperators) {
    EXPECT_EQ(torchOperator(native("at::_ops::linear::call(at::Tensor const&)")), "aten::linear");
    EXPECT_EQ(torchOperator(native("at::_ops::add_Tensor::call(at::Tensor const&)")),
              "aten::add_Tensor");
    EXPECT_EQ(torchOperator(native("at::_ops::linear::redispatch(c10::DispatchKeySet)")), "");
    EXPECT_EQ(torchOperator(py("at::_ops::linear::call(")), "");
}

TEST(SiteChoice, EachModeNamesItsFrame) {
    const std::vector<Frame> s = adamStack();
    EXPECT_EQ(chooseSite(s, SiteMode::User), 7u);
    EXPECT_EQ(chooseSite(s, SiteMode::All), 0u);
    EXPECT_EQ(chooseSite(s, SiteMode::Library), 4u);  // Adam.step, past two wrappers
    EXPECT_EQ(framesBelow(s, 7, 3), (std::vector<size_t>{4, 2, 1}));
    EXPECT_EQ(chooseSite({}, SiteMode::User), std::nullopt);
}

TEST(SiteChoice, WithoutUserCodeTheOperatorIsTheSite) {
    std::vector<Frame> s = adamStack();
    s.resize(5);  // up to Adam.step, none of it the user's
    s.push_back(py("Thread.run"));
    EXPECT_EQ(chooseSite(s, SiteMode::User), 2u);
    EXPECT_EQ(chooseSite(s, SiteMode::Library), 2u);
    // No operator either: the first frame outside the allocator.
    const std::vector<Frame> bare{native("c10::alloc_cpu(unsigned long)", "/usr/lib/libc10.so"),
                                  native("at::detail::empty_cpu(long)")};
    EXPECT_EQ(chooseSite(bare, SiteMode::User), 1u);
}
