// The three pieces of the C++ runtime the collector's code calls, its own and
// hidden, so that the preloaded library needs no libstdc++. A library named in
// LD_PRELOAD joins the program's global symbol scope with its dependencies:
// with libstdc++, libm and libgcc_s there, every symbol lookup of every library
// the program loads searched them too (8 million more instructions in the
// dynamic linker during `import torch`, counted by callgrind).
//
// Function-local statics with a dynamic initializer (the real functions found
// with dlsym, a page size) are guarded as the Itanium C++ ABI says: byte 0 of
// the 64-bit guard is set once the object is initialized (the compiler tests it
// inline before calling here); byte 1 marks an initialization under way.
#include <sched.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#define MEMTOOL_HIDDEN __attribute__((visibility("hidden")))

namespace {

uint8_t* doneByte(uint64_t* guard) { return reinterpret_cast<uint8_t*>(guard); }
uint8_t* busyByte(uint64_t* guard) { return reinterpret_cast<uint8_t*>(guard) + 1; }

}  // namespace

extern "C" {

// 1: the caller initializes the object, then calls __cxa_guard_release (or
// __cxa_guard_abort if its initializer fails); 0: it is initialized.
MEMTOOL_HIDDEN int __cxa_guard_acquire(uint64_t* guard) {
    for (;;) {
        if (__atomic_load_n(doneByte(guard), __ATOMIC_ACQUIRE)) return 0;
        uint8_t idle = 0;
        if (__atomic_compare_exchange_n(busyByte(guard), &idle, 1, false, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED)) {
            if (!__atomic_load_n(doneByte(guard), __ATOMIC_ACQUIRE)) return 1;
            __atomic_store_n(busyByte(guard), 0, __ATOMIC_RELEASE);
            return 0;
        }
        sched_yield();  // another thread runs the initializer: a dlsym, a sysconf
    }
}

MEMTOOL_HIDDEN void __cxa_guard_release(uint64_t* guard) {
    __atomic_store_n(doneByte(guard), 1, __ATOMIC_RELEASE);
    __atomic_store_n(busyByte(guard), 0, __ATOMIC_RELEASE);
}

MEMTOOL_HIDDEN void __cxa_guard_abort(uint64_t* guard) {
    __atomic_store_n(busyByte(guard), 0, __ATOMIC_RELEASE);
}

}  // extern "C"

// Named by the deleting destructors of classes with virtual destructors (the
// sinks, the backends); the collector never allocates with new, so they are
// never called. The library's version script (collector.map) keeps them from
// being exported, where they would replace the program's own.
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
