#include "collectors/StackCapture.h"

#include <dlfcn.h>
#include <link.h>

namespace memtool::collectors {

bool StackCapture::load(const char** why) { return unwinder_.load(why); }

bool StackCapture::codeRangeOf(const void* address, uint64_t* start, uint64_t* end) {
    Dl_info self;
    if (!dladdr(address, &self) || !self.dli_fbase) return false;
    struct Range {
        uintptr_t base;
        uintptr_t address;
        uint64_t start = 0, end = 0;
    } range{reinterpret_cast<uintptr_t>(self.dli_fbase), reinterpret_cast<uintptr_t>(address)};
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* data) {
            auto* r = static_cast<Range*>(data);
            if (info->dlpi_addr > r->base) return 0;
            for (int i = 0; i < info->dlpi_phnum; ++i) {
                const auto& ph = info->dlpi_phdr[i];
                if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
                const uint64_t s = info->dlpi_addr + ph.p_vaddr;
                if (r->address >= s && r->address < s + ph.p_memsz) {
                    r->start = s;
                    r->end = s + ph.p_memsz;
                    return 1;
                }
            }
            return 0;
        },
        &range);
    *start = range.start;
    *end = range.end;
    return range.end != 0;
}

int StackCapture::native(ThreadState& ts, uint64_t* ips, int maxDepth,
                         bool stopAtInterpreter) const {
    void* raw[kMaxNativeDepth + 8];
    const int limit = maxDepth + 8 < kMaxNativeDepth + 8 ? maxDepth + 8 : kMaxNativeDepth + 8;
    const bool cutAtLoop = stopAtInterpreter && evalStart_ != 0;
    int got = 0;
    int cut = -1;  // index of the innermost interpreter-loop frame
    auto findLoop = [&] {
        for (int i = 0; i < got && cut < 0; ++i)
            if (inInterpreterLoop(reinterpret_cast<uint64_t>(raw[i])))
                cut = i;  // a return address: ip - 1 is inside
    };
    if (cutAtLoop) {
        int want = ts.evalDepth > 0 ? ts.evalDepth + 4 : 24;
        if (want > limit) want = limit;
        got = unwinder_.backtrace(raw, want);
        findLoop();
        if (cut < 0 && got == want && want < limit) got = 0;  // deeper than guessed: walk it all
    }
    if (got == 0) {
        got = unwinder_.backtrace(raw, limit);
        if (cutAtLoop) findLoop();
    }
    if (cut >= 0) {
        ts.evalDepth = cut + 1;
        got = cut + 1;  // keep the loop's own frame: the CLI splices Python frames there
    }
    int skip = 0;
    while (skip < got && reinterpret_cast<uint64_t>(raw[skip]) >= ownStart_ &&
           reinterpret_cast<uint64_t>(raw[skip]) < ownEnd_)
        ++skip;
    int n = 0;
    for (int i = skip; i < got && n < maxDepth; ++i) ips[n++] = reinterpret_cast<uint64_t>(raw[i]);
    return n;
}

}  // namespace memtool::collectors
