#pragma once
// Real inlined code for ElfSymbolizerTest, compiled -O2 -g (tests/CMakeLists.txt):
// one call made from a function inlined into another inlined into a third.

#include <cstdint>

namespace memtool::testing {

// The return address of the call InlinedCode.cpp makes at its line 18, in
// innermost(), inlined at line 23 into middle(), inlined at line 26 into
// inlinedCallAddress().
uint64_t inlinedCallAddress();

// The same call, middle() inlined at line 38 into a lambda defined in
// inlinedIntoALambda(), and at line 47 into a lambda at namespace level.
uint64_t inlinedIntoALambda();
uint64_t inlinedIntoANamespaceLambda();

}  // namespace memtool::testing
