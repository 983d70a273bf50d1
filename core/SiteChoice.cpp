#include "core/SiteChoice.h"

#include <algorithm>

#include "core/FrameClassifier.h"

namespace memtool::core {

namespace {

// The last part of a qualified name: "A.<locals>.b.<locals>.wrapper" -> "wrapper".
std::string lastPart(const std::string& qualname) {
    const size_t dot = qualname.rfind('.');
    return dot == std::string::npos ? qualname : qualname.substr(dot + 1);
}

// The outermost torch operator on the stack: the one the caller asked for (inner
// ones are its implementation).
std::optional<size_t> outermostOperator(const std::vector<Frame>& stack, size_t below) {
    for (size_t i = below; i > 0; --i)
        if (!torchOperator(stack[i - 1]).empty()) return i - 1;
    return std::nullopt;
}

}  // namespace

std::optional<SiteMode> parseSiteMode(const std::string& text) {
    if (text == "user") return SiteMode::User;
    if (text == "all") return SiteMode::All;
    if (text == "library") return SiteMode::Library;
    return std::nullopt;
}

const char* siteModeName(SiteMode mode) {
    switch (mode) {
        case SiteMode::User:
            break;
        case SiteMode::All:
            return "all";
        case SiteMode::Library:
            return "library";
    }
    return "user";
}

bool isPassThroughFrame(const Frame& f) {
    if (f.user) return false;
    if (f.isUnnamed()) return true;
    if (!f.isPython()) return false;
    // Names of the wrappers torch and functools-style decorators put between a
    // call and what it does (torch 1.13 to 2.5: nn.Module's call, the optimizer's
    // profiling hook and no-grad decorator, torch.utils._contextlib), and any
    // library function named as a wrapper is (torchvision's
    // handle_legacy_interface.<locals>.outer_wrapper.<locals>.inner_wrapper).
    static const char* const kWrappers[] = {
        "_call_impl", "_wrapped_call_impl", "wrapper",   "_wrapper",         "wrapped", "inner",
        "_fn",        "decorate_context",   "_use_grad", "profile_hook_step"};
    const std::string last = lastPart(f.function);
    static const std::string kSuffix = "_wrapper";
    if (last.size() > kSuffix.size() &&
        last.compare(last.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0)
        return true;
    return std::find(std::begin(kWrappers), std::end(kWrappers), last) != std::end(kWrappers);
}

std::string torchOperator(const Frame& f) {
    static const std::string prefix = "at::_ops::";
    if (f.isPython() || f.function.rfind(prefix, 0) != 0) return {};
    const size_t end = f.function.find("::call(", prefix.size());
    if (end == std::string::npos) return {};
    return "aten::" + f.function.substr(prefix.size(), end - prefix.size());
}

std::optional<size_t> chooseSite(const std::vector<Frame>& stack, SiteMode mode) {
    if (stack.empty()) return std::nullopt;
    if (mode == SiteMode::All) return 0;
    auto user = std::find_if(stack.begin(), stack.end(), [](const Frame& f) { return f.user; });
    if (user != stack.end()) {
        const size_t at = static_cast<size_t>(user - stack.begin());
        if (mode == SiteMode::User) return at;
        const std::vector<size_t> below = framesBelow(stack, at, 1);
        return below.empty() ? at : below.front();
    }
    if (auto op = outermostOperator(stack, stack.size())) return op;
    auto outside = std::find_if(stack.begin(), stack.end(),
                                [](const Frame& f) { return !isAllocatorModule(f.module); });
    return outside != stack.end() ? static_cast<size_t>(outside - stack.begin()) : 0;
}

std::vector<size_t> framesBelow(const std::vector<Frame>& stack, size_t site, size_t depth) {
    std::vector<size_t> out;
    for (size_t i = site; i > 0 && out.size() < depth; --i)
        if (!isPassThroughFrame(stack[i - 1])) out.push_back(i - 1);
    return out;
}

}  // namespace memtool::core
