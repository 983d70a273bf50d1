#include "trace/HotspotSelection.h"

#include <algorithm>

#include "core/Error.h"

namespace memtool::reporters {

SortKey parseSortKey(const std::string& text) {
    if (text == "peak") return SortKey::Peak;
    if (text == "allocated") return SortKey::Allocated;
    if (text == "count") return SortKey::Count;
    if (text == "leaked") return SortKey::Leaked;
    if (text == "held-at-exit") return SortKey::HeldAtExit;
    if (text == "active") return SortKey::Active;
    if (text == "reserved") return SortKey::Reserved;
    throw core::Error(
        core::kExitBadInput,
        "unknown sort key '" + text +
            "' (use peak, allocated, count, leaked, held-at-exit, active or reserved)");
}

GroupBy parseGroupBy(const std::string& text) {
    if (text == "site") return GroupBy::Site;
    if (text == "function") return GroupBy::Function;
    if (text == "module") return GroupBy::Module;
    if (text == "op") return GroupBy::Op;
    throw core::Error(core::kExitBadInput,
                      "unknown grouping '" + text + "' (use site, function, module or op)");
}

const char* sortKeyName(SortKey key) {
    switch (key) {
        case SortKey::Peak:
            return "peak";
        case SortKey::Allocated:
            return "allocated";
        case SortKey::Count:
            return "count";
        case SortKey::Leaked:
            return "leaked";
        case SortKey::HeldAtExit:
            return "held at exit";
        case SortKey::Active:
            return "active peak";
        case SortKey::Reserved:
            return "reserved peak";
    }
    return "peak";
}

uint64_t sortValue(const core::Hotspot& h, SortKey key) {
    switch (key) {
        case SortKey::Peak:
            return h.peakBytes;
        case SortKey::Allocated:
            return h.allocatedBytes;
        case SortKey::Count:
            return h.count;
        case SortKey::Leaked:
            return h.leakedBytes;
        case SortKey::HeldAtExit:
            return h.heldAtExitBytes;
        case SortKey::Active:
        case SortKey::Reserved: {
            auto it =
                h.pools.find(key == SortKey::Active ? core::kPoolActive : core::kPoolReserved);
            return it == h.pools.end() ? 0 : it->second.peakBytes;
        }
    }
    return 0;
}

ReportOptions optionsFor(const core::ProcessTrace& p, const std::string& device,
                         const ReportOptions& requested) {
    ReportOptions options = requested;
    auto it = p.devices.find(device);
    const bool pools = it != p.devices.end() && !it->second.pools.empty();
    if ((options.sort == SortKey::Active || options.sort == SortKey::Reserved) && !pools)
        options.sort = SortKey::Peak;
    return options;
}

std::vector<const core::Hotspot*> selectHotspots(const core::ProcessTrace& p,
                                                 const std::string& device,
                                                 const ReportOptions& options) {
    std::vector<const core::Hotspot*> out;
    for (const auto& h : p.hotspots)
        if (h.device == device) out.push_back(&h);
    std::stable_sort(out.begin(), out.end(), [&](const core::Hotspot* a, const core::Hotspot* b) {
        uint64_t ka = sortValue(*a, options.sort), kb = sortValue(*b, options.sort);
        if (ka != kb) return ka > kb;
        if (a->allocatedBytes != b->allocatedBytes) return a->allocatedBytes > b->allocatedBytes;
        return a->site < b->site;
    });
    if (out.size() > options.top) out.resize(options.top);
    return out;
}

namespace {

bool isIdentifierChar(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// "operator" as a word at `at` (not "cooperator", not "operator_x").
bool isOperatorKeyword(const std::string& name, size_t at) {
    static const std::string kOperator = "operator";
    return name.compare(at, kOperator.size(), kOperator) == 0 &&
           (at == 0 || !isIdentifierChar(name[at - 1])) &&
           (at + kOperator.size() == name.size() || !isIdentifierChar(name[at + kOperator.size()]));
}

// Past an operator's symbol starting at `at` (just after the keyword): "()" and
// "[]" whole, else a run of operator characters ("<", "<<=", "->*", ","). A word
// ("new", "bool") needs no skipping: it is no bracket.
size_t pastOperatorSymbol(const std::string& name, size_t at) {
    if (name.compare(at, 2, "()") == 0 || name.compare(at, 2, "[]") == 0) return at + 2;
    static const std::string kSymbols = "+-*/%^&|~!=<>,";
    while (at < name.size() && kSymbols.find(name[at]) != std::string::npos) ++at;
    return at;
}

// Whether the parenthesis at `open` names a scope ("(anonymous namespace)::f"):
// its match is followed by "::".
bool opensScope(const std::string& name, size_t open) {
    int depth = 0;
    for (size_t i = open; i < name.size(); ++i) {
        if (name[i] == '(') ++depth;
        if (name[i] == ')' && --depth == 0) return name.compare(i + 1, 2, "::") == 0;
    }
    return false;
}

// Template argument lists longer than this show as "<...>": torch's kernel wrappers
// carry whole signatures in theirs (c10::impl::wrap_kernel_functor_unboxed_<...>::call
// runs to a thousand characters and more on a backward pass's stacks).
constexpr size_t kLongestTemplateArguments = 40;

std::string elideLongTemplateArguments(const std::string& name) {
    std::string out;
    for (size_t i = 0; i < name.size();) {
        if (isOperatorKeyword(name, i)) {  // "operator<", "operator->": no bracket
            const size_t end = pastOperatorSymbol(name, i + 8);
            out.append(name, i, end - i);
            i = end;
            continue;
        }
        if (name[i] != '<') {
            out += name[i++];
            continue;
        }
        size_t close = i + 1;
        for (int depth = 1; close < name.size(); ++close) {
            if (isOperatorKeyword(name, close))
                close = pastOperatorSymbol(name, close + 8) - 1;
            else if (name[close] == '<')
                ++depth;
            else if (name[close] == '>' && --depth == 0)
                break;
        }
        if (close >= name.size()) return out + name.substr(i);  // unbalanced: as it is
        if (close - i - 1 > kLongestTemplateArguments)
            out += "<...>";
        else
            out.append(name, i, close + 1 - i);
        i = close + 1;
    }
    return out;
}

std::string withoutParameters(const std::string& function) {
    // One pass over the name, brackets counted together: the parameter list is the
    // first "(" outside all of them that opens no scope; the return type (template
    // functions' names carry one) ends at the last space outside them before the
    // name's "operator", whose symbol may be "<" or "()" and is skipped whole.
    int depth = 0;
    size_t nameStart = 0;
    bool inOperator = false;  // spaces belong to the name now: "operator new", "operator bool"
    for (size_t i = 0; i < function.size(); ++i) {
        if (isOperatorKeyword(function, i)) {
            inOperator = inOperator || depth == 0;
            i = pastOperatorSymbol(function, i + 8) - 1;
            continue;
        }
        switch (function[i]) {
            case '<':
            case '[':
            case '{':
                ++depth;
                break;
            case '>':
            case ']':
            case '}':
            case ')':
                depth = std::max(depth - 1, 0);
                break;
            case '(':
                if (depth == 0 && !opensScope(function, i))
                    return i == nameStart ? function : function.substr(nameStart, i - nameStart);
                ++depth;
                break;
            case ' ':
                if (depth == 0 && !inOperator) nameStart = i + 1;
                break;
            default:
                break;
        }
    }
    return function;  // no parameter list: a C name, or one demangling left alone
}

}  // namespace

std::string shortFunctionName(const std::string& function) {
    return elideLongTemplateArguments(withoutParameters(function));
}

std::string shortFrame(const core::Frame& frame) {
    std::string where = core::frameLocation(frame);
    size_t slash = where.rfind('/');
    std::string file = slash == std::string::npos ? where : where.substr(slash + 1);
    const std::string name = core::frameName(frame);
    return (frame.isPython() ? name : shortFunctionName(name)) + " (" + file + ")";
}

std::string shownSite(const core::ProcessTrace& p, const std::optional<uint32_t>& frame,
                      const std::string& text) {
    return frame ? shortFrame(p.frames.at(*frame)) : text;
}

std::string oomSite(const core::ProcessTrace& p, const core::OomEvent& e) {
    return e.source.empty() ? "" : shownSite(p, e.siteFrame, core::kNoStackSite);
}

const core::Frame* siteFrame(const core::ProcessTrace& p, const core::Hotspot& h) {
    return h.siteFrame ? &p.frames.at(*h.siteFrame) : nullptr;
}

}  // namespace memtool::reporters
