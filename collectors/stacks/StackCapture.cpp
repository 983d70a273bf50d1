#include "collectors/stacks/StackCapture.h"

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

}  // namespace memtool::collectors
