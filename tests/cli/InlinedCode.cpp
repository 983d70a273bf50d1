// Lines are what ElfSymbolizerTest asserts: keep them where they are
// (InlinedCode.h names them).
#include "tests/cli/InlinedCode.h"

namespace memtool::testing {

__attribute__((noinline)) uint64_t returnAddress() {
    return reinterpret_cast<uint64_t>(__builtin_return_address(0));
}

// Not in an anonymous namespace: the names the test expects are the linkage
// names' ("memtool::testing::innermost()"). Each is always inlined, never emitted
// on its own.

__attribute__((always_inline)) inline uint64_t innermost() {
    // The asm after the call keeps it a call (no tail jump): its return address
    // stays inside the code inlined into inlinedCallAddress().
    uint64_t ip = returnAddress();
    asm volatile("" : "+r"(ip));
    return ip;
}

__attribute__((always_inline)) inline uint64_t middle() { return innermost() + 0; }

__attribute__((noinline)) uint64_t inlinedCallAddress() {
    const uint64_t ip = middle();
    return ip;
}

}  // namespace memtool::testing

namespace memtool::testing {

// A lambda's code: operator() of its closure type, and, for a lambda taken as a
// function pointer, the closure type's static _FUN. GCC puts _FUN's code, with
// operator() inlined into it, inside the closure type, which lies in the
// function that defines the lambda.
__attribute__((noinline)) uint64_t inlinedIntoALambda() {
    uint64_t (*volatile body)() = []() {
        const uint64_t ip = middle();
        asm volatile("" : : "r"(ip));
        return ip;
    };
    return body();
}

// A lambda at namespace level: its closure type lies there too.
uint64_t (*volatile namespaceLambda)() = []() {
    const uint64_t ip = middle();
    asm volatile("" : : "r"(ip));
    return ip;
};

__attribute__((noinline)) uint64_t inlinedIntoANamespaceLambda() { return namespaceLambda(); }

}  // namespace memtool::testing
