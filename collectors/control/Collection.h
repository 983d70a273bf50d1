#pragma once
// `gc` (a memory policy's action, cli/policy): give back what the program no
// longer uses. Python's gc.collect() on the main thread at a safe point (the GIL
// held, as any bytecode would), then the caching allocator's unused blocks
// (torch.cuda.empty_cache through the torch bridge, without the GIL), then the C
// library's free heap memory (malloc_trim). What resident memory that gave back
// is the answer's `bytes`.

#include <cstddef>
#include <cstdint>

namespace memtool::collectors::control {

class SafePoint;

class Collection {
public:
    constexpr explicit Collection(SafePoint& safePoint) : safePoint_(safePoint) {}
    Collection(const Collection&) = delete;
    Collection& operator=(const Collection&) = delete;

    void setCacheEmptier(void (*emptier)()) { emptyCache_ = emptier; }
    // "gc [--wait SECONDS]": a JSON answer in `out`; returns a core::ReplyStatus.
    uint8_t command(size_t argc, const char* const* argv, char* out, size_t size);

private:
    SafePoint& safePoint_;
    void (*emptyCache_)() = nullptr;
};

}  // namespace memtool::collectors::control
