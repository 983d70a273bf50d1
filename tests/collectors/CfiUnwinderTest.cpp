// CfiUnwinder against libunwind, the library whose answers it must repeat: the same
// return addresses from the same call site, through this binary's frames of every
// shape (rsp-based, rbp-based with alloca, large frames), libc's, a thread's
// outermost frame and the main thread's; a signal frame makes it give up.
#include <alloca.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "collectors/engine/ThreadState.h"
#include "collectors/stacks/CfiUnwinder.h"

using namespace memtool::collectors;

namespace {

using Backtrace = int (*)(void**, int);

Backtrace libunwind() {
#if defined(__SANITIZE_THREAD__)
    // libunwind's per-thread cache dies in a TSan build's thread exit (see
    // NativeUnwinder.cpp); glibc's backtrace() gives the same return addresses,
    // after one of its own (TSan's interceptor).
    return ::backtrace;
#endif
    static Backtrace fn = [] {
        void* lib = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
        return lib ? reinterpret_cast<Backtrace>(dlsym(lib, "unw_backtrace")) : nullptr;
    }();
    return fn;
}

struct Walks {
    std::vector<void*> cfi, unw;
};

constexpr int kMax = 128;
#if defined(__SANITIZE_THREAD__)
constexpr int kReferenceSkip = 2;
#else
constexpr int kReferenceSkip = 1;
#endif

// Both walks from one function; their first entries are its own two call sites,
// so only the callers' addresses (from index 1) must be equal.
__attribute__((noinline)) Walks walkBoth() {
    void* a[kMax];
    void* b[kMax];
    const int n = memtool_cfi_backtrace(a, kMax, threadState());
    const int m = libunwind()(b, kMax);
    Walks w;
    if (n > 0) w.cfi.assign(a + 1, a + n);
    if (m > kReferenceSkip) w.unw.assign(b + kReferenceSkip, b + m);
    if (n < 0) w.cfi.assign(1, nullptr);  // gave up: never equal to libunwind's
    return w;
}

volatile int gSink;
char* volatile gEscape;  // an alloca'd block escapes: the compiler must keep it

// Frames of different shapes on the way down.
__attribute__((noinline)) Walks withAlloca(int n) {
    char* p = static_cast<char*>(alloca(n));  // forces an rbp-based CFA
    std::memset(p, 1, n);
    gEscape = p;
    Walks w = walkBoth();
    gSink = p[0];
    return w;
}

__attribute__((noinline)) Walks withLargeFrame(int n) {
    volatile char big[70000];  // a CFA offset beyond 16 bits
    big[n] = 1;
    Walks w = withAlloca(64 + n);
    gSink = big[n];
    return w;
}

// rbp-based frames calling rbp-based frames: each caller's rbp must be restored.
__attribute__((noinline)) Walks recurse(int depth) {
    if (depth == 0) return withLargeFrame(3);
    char* p = static_cast<char*>(alloca(16 + depth));
    p[depth] = char(depth);
    gEscape = p;
    Walks w = recurse(depth - 1);
    gSink = p[depth];  // not a tail call
    return w;
}

// Two walks from one loop, the second told to stop after the frame at index `at`
// of the first (its return address alone is the stop range). Their first entries
// are the loop's call sites, which a compiler may make two (the ASan build does).
struct StoppedWalk {
    std::vector<void*> whole, stopped;
};
__attribute__((noinline)) StoppedWalk walkTwiceStoppingAt(int at) {
    ThreadState* ts = threadState();
    std::vector<void*> walks[2];
    for (int i = 0; i < 2; ++i) {
        void* out[kMax];
        if (i == 1 && static_cast<int>(walks[0].size()) > at) {
            ts->walkStopEnd = reinterpret_cast<uint64_t>(walks[0][at]);
            ts->walkStopStart = ts->walkStopEnd - 1;
        }
        const int n = memtool_cfi_backtrace(out, kMax, ts);
        ts->walkStopStart = ts->walkStopEnd = 0;
        walks[i].assign(out, out + (n > 0 ? n : 0));
    }
    return StoppedWalk{walks[0], walks[1]};
}

__attribute__((noinline)) StoppedWalk stopMiddle(int at) {
    StoppedWalk w = walkTwiceStoppingAt(at);
    gSink = at;  // not a tail call
    return w;
}

__attribute__((noinline)) StoppedWalk stopOuter(int at) {
    StoppedWalk w = stopMiddle(at);
    gSink = at;
    return w;
}

Walks gFromQsort;
int compareAndWalk(const void* a, const void* b) {
    if (gFromQsort.cfi.empty()) gFromQsort = recurse(2);
    return *static_cast<const int*>(a) - *static_cast<const int*>(b);
}

}  // namespace

TEST(CfiUnwinder, RepeatsLibunwindDownToTheMainThreadsFirstFrame) {
    if (!libunwind()) GTEST_SKIP() << "libunwind.so.8 is not installed";
    const Walks w = recurse(5);
    ASSERT_GT(w.unw.size(), 8u);
    EXPECT_EQ(w.cfi, w.unw);
}

// The walk ends after the first frame whose return address is in the stop range
// (the interpreter loop's code, in the collector), with that frame kept.
TEST(CfiUnwinder, EndsAfterTheFrameInTheStopRange) {
    const StoppedWalk w = stopOuter(2);  // walkTwiceStoppingAt, stopMiddle, stopOuter, ...
    ASSERT_GT(w.whole.size(), 4u);
    ASSERT_EQ(w.stopped.size(), 3u);
    EXPECT_EQ(std::vector<void*>(w.stopped.begin() + 1, w.stopped.end()),
              std::vector<void*>(w.whole.begin() + 1, w.whole.begin() + 3));
}

TEST(CfiUnwinder, RepeatsLibunwindThroughLibcCallingBack) {
    if (!libunwind()) GTEST_SKIP() << "libunwind.so.8 is not installed";
    int values[] = {5, 3, 9, 1, 7, 2, 8};
    gFromQsort = {};
    qsort(values, sizeof values / sizeof *values, sizeof *values, compareAndWalk);
    ASSERT_FALSE(gFromQsort.unw.empty());
    EXPECT_EQ(gFromQsort.cfi, gFromQsort.unw);
    Dl_info info{};
    bool throughLibc = false;
    for (void* ip : gFromQsort.unw)
        if (dladdr(ip, &info) && info.dli_fname && std::strstr(info.dli_fname, "libc.so"))
            throughLibc = true;
    EXPECT_TRUE(throughLibc);
}

TEST(CfiUnwinder, RepeatsLibunwindOnAThreadDownToItsFirstFrame) {
    if (!libunwind()) GTEST_SKIP() << "libunwind.so.8 is not installed";
    Walks first, second;
    std::thread t([&] {
        first = recurse(3);
        second = recurse(3);  // from the thread's cached rules
    });
    t.join();
    ASSERT_GT(first.unw.size(), 6u);
    EXPECT_EQ(first.cfi, first.unw);
    EXPECT_EQ(second.cfi, second.unw);
}

TEST(CfiUnwinder, RepeatsLibunwindAfterALibraryIsUnloaded) {
    if (!libunwind()) GTEST_SKIP() << "libunwind.so.8 is not installed";
    const Walks before = recurse(1);
    codeUnloaded();  // every cached rule dropped
    const Walks after = recurse(1);
    EXPECT_EQ(before.cfi, before.unw);
    EXPECT_EQ(after.cfi, after.unw);
}

namespace {
// A walk from one of many call sites in walkFromEverySite: a return address of
// its own each (GCC folds the identical walkFromSite<N> into one), the rest shared.
template <int N>
__attribute__((noinline)) int walkFromSite() {
    void* out[kMax];
    const int n = memtool_cfi_backtrace(out, kMax, threadState());
    asm volatile("" : : "r"(n) : "memory");  // no tail call: its frame stays
    return n;
}

template <int... N>
__attribute__((noinline)) int walkFromEverySite(std::integer_sequence<int, N...>) {
    int walked = 0;
    ((walked += walkFromSite<N>() > 0), ...);
    return walked;
}
constexpr int kSites = 80;
}  // namespace

// Each frame's rule is read from .eh_frame once and then comes from the
// thread's table: walking from 80 call sites again reads nothing. (A table of
// one slot per hash lost some of these return addresses to each other.)
TEST(CfiUnwinder, ReadsEachFramesRuleOnce) {
    uint64_t reads[2] = {};
    int walked = 0;
    std::thread([&] {  // a thread of its own: its table starts empty
        for (uint64_t& r : reads) {
            const uint64_t before = ruleReads();
            walked += walkFromEverySite(std::make_integer_sequence<int, kSites>());
            r = ruleReads() - before;
        }
    })
        .join();
    EXPECT_EQ(walked, 2 * kSites);
    EXPECT_GE(reads[0], uint64_t{kSites});
    EXPECT_EQ(reads[1], 0u);
}

// A rule read asks the loader which module holds its address (dl_iterate_phdr
// walks every loaded object: 300 of them in a torch program) only for a module
// the thread has not met yet: 80 new call sites in this test's own code cost one
// lookup, not 80; after an unload the modules are asked for again.
TEST(CfiUnwinder, AsksTheLoaderOncePerModule) {
    uint64_t reads = 0, lookups = 0, lookupsAfterUnload = 0;
    std::thread([&] {  // a thread of its own: its tables start empty
        const uint64_t readsBefore = ruleReads(), before = moduleLookups();
        EXPECT_EQ(walkFromEverySite(std::make_integer_sequence<int, kSites>()), kSites);
        reads = ruleReads() - readsBefore;
        lookups = moduleLookups() - before;
        codeUnloaded();
        const uint64_t again = moduleLookups();
        EXPECT_EQ(walkFromEverySite(std::make_integer_sequence<int, kSites>()), kSites);
        lookupsAfterUnload = moduleLookups() - again;
    })
        .join();
    EXPECT_GE(reads, uint64_t{kSites});
    // The test binary, libstdc++ (std::thread) and libc (the thread's start).
    EXPECT_GE(lookups, 1u);
    EXPECT_LE(lookups, 4u);
    EXPECT_EQ(lookupsAfterUnload, lookups);
}

namespace {
int gInHandler = 0;
void walkInHandler(int) {
    void* out[kMax];
    gInHandler = memtool_cfi_backtrace(out, kMax, threadState());
}
}  // namespace

TEST(CfiUnwinder, GivesUpAtASignalFrame) {
    struct sigaction action {
    }, old{};
    action.sa_handler = walkInHandler;
    sigemptyset(&action.sa_mask);
    ASSERT_EQ(sigaction(SIGUSR2, &action, &old), 0);
    gInHandler = 0;
    raise(SIGUSR2);
    sigaction(SIGUSR2, &old, nullptr);
    EXPECT_EQ(gInHandler, -1);  // the caller asks libunwind, which knows signal frames
}

TEST(CfiUnwinder, RuleAtAFunctionsFirstInstruction) {
    // Before its prologue a function's CFA is rsp + 8 and rbp is untouched.
    const FrameRule rule = frameRuleFor(reinterpret_cast<uint64_t>(&walkBoth));
    EXPECT_EQ(rule.kind, FrameRule::Frame);
    EXPECT_FALSE(rule.cfaFromRbp);
    EXPECT_EQ(rule.cfaOffset, 8u);
    EXPECT_FALSE(rule.rbpSaved);
}

TEST(CfiUnwinder, NoRuleOutsideLoadedCode) {
    std::vector<char> heap(64);
    EXPECT_EQ(frameRuleFor(reinterpret_cast<uint64_t>(heap.data())).kind, FrameRule::Unsupported);
    EXPECT_EQ(frameRuleFor(0).kind, FrameRule::Unsupported);
}

TEST(CfiUnwinder, RulesPackIntoAWordAndBack) {
    FrameRule r;
    r.kind = FrameRule::Frame;
    r.cfaFromRbp = true;
    r.rbpSaved = true;
    r.cfaOffset = 0x0fffffff;
    r.rbpSlot = 0xffff;
    const FrameRule back = FrameRule::unpack(r.pack());
    EXPECT_EQ(back.kind, FrameRule::Frame);
    EXPECT_TRUE(back.cfaFromRbp);
    EXPECT_TRUE(back.rbpSaved);
    EXPECT_EQ(back.cfaOffset, 0x0fffffffu);
    EXPECT_EQ(back.rbpSlot, 0xffffu);
    EXPECT_NE(r.pack(), 0u);  // 0 marks an empty cache slot
}

// A walk from the call site and stack pointer of the thread's last walk, with
// every stack slot that walk read unchanged, is that walk again: it is replayed,
// not done. The frames are libunwind's either way.
TEST(CfiUnwinder, ReplaysTheLastWalkWhenNothingItReadChanged) {
    if (!libunwind()) GTEST_SKIP() << "libunwind.so.8 is not installed";
    Walks walks[2];
    uint64_t replayed[2] = {};
    std::thread([&] {
        const WalkMemo& memo = threadState()->walkMemo;
        for (int i = 0; i < 2; ++i) {
            const uint64_t before = memo.replays;
            walks[i] = recurse(3);
            replayed[i] = memo.replays - before;
        }
    }).join();
    EXPECT_EQ(replayed[0], 0u);
    EXPECT_EQ(replayed[1], 1u);
    ASSERT_GT(walks[1].unw.size(), 6u);
    EXPECT_EQ(walks[0].cfi, walks[0].unw);
    EXPECT_EQ(walks[1].cfi, walks[1].unw);
}

namespace {
// Two callers of one shape: called in turn from one place, each puts leafWalk's
// frame at the same address, so the next walk starts where the last one did and
// only the return address into its caller differs.
__attribute__((noinline)) Walks leafWalk(void** frame) {
    *frame = __builtin_frame_address(0);
    Walks w = walkBoth();
    gSink = 0;  // not a tail call
    return w;
}
__attribute__((noinline)) Walks callerA(void** frame) {
    Walks w = leafWalk(frame);
    gSink = 1;
    return w;
}
__attribute__((noinline)) Walks callerB(void** frame) {
    Walks w = leafWalk(frame);
    gSink = 2;
    return w;
}
}  // namespace

TEST(CfiUnwinder, WalksAgainWhenAReturnAddressItReadChanged) {
    if (!libunwind()) GTEST_SKIP() << "libunwind.so.8 is not installed";
    Walks a, b;
    void* frames[2] = {};
    uint64_t replayed = 1;
    std::thread([&] {
        const WalkMemo& memo = threadState()->walkMemo;
        a = callerA(&frames[0]);
        const uint64_t before = memo.replays;
        b = callerB(&frames[1]);
        replayed = memo.replays - before;
    }).join();
    ASSERT_EQ(frames[0], frames[1]);  // else the memo is not even asked
    EXPECT_EQ(replayed, 0u);
    ASSERT_GT(b.unw.size(), 3u);
    EXPECT_EQ(a.cfi, a.unw);
    EXPECT_EQ(b.cfi, b.unw);
    EXPECT_NE(a.cfi, b.cfi);  // callerA's return address, then callerB's
}

// A frame's CFA can come from an rbp restored out of an inner frame's save slot:
// that slot is one the walk read, and a replay must check it like a return
// address. A fabricated stack (on this thread's own, so inside its bounds) of
// three rbp-based frames, walked through memtool_cfi_walk with fixed registers:
// the second walk is replayed; after only the first frame's saved rbp changes
// (every return-address slot the walk read unchanged), the walk is done again
// and follows the new rbp.
extern "C" int memtool_cfi_walk(void** out, int max, const uint64_t* regs, ThreadState* ts);

namespace {
__attribute__((noinline)) uint64_t returnAddress() {
    return reinterpret_cast<uint64_t>(__builtin_return_address(0));
}
// Return addresses inside rbp-based frames (alloca forces one), after their prologue.
__attribute__((noinline)) uint64_t pcInRbpFrame(int n) {
    char* p = static_cast<char*>(alloca(n));
    std::memset(p, 1, n);
    gEscape = p;
    const uint64_t pc = returnAddress();
    gSink = p[0];
    return pc;
}
__attribute__((noinline)) uint64_t pcInOtherRbpFrame(int n) {
    char* p = static_cast<char*>(alloca(n + 8));
    std::memset(p, 2, n);
    gEscape = p;
    const uint64_t pc = returnAddress();
    gSink = p[1];
    return pc;
}
}  // namespace

TEST(CfiUnwinder, WalksAgainWhenOnlyARestoredRbpChanged) {
    const uint64_t r = pcInRbpFrame(8), x = pcInOtherRbpFrame(8);
    ASSERT_NE(r, x);
    for (uint64_t pc : {r, x}) {
        const FrameRule rule = frameRuleFor(pc - 1);
        ASSERT_EQ(rule.kind, FrameRule::Frame);
        ASSERT_TRUE(rule.cfaFromRbp);  // CFA = rbp + 16, rbp saved at CFA - 16
        ASSERT_EQ(rule.cfaOffset, 16u);
        ASSERT_TRUE(rule.rbpSaved);
        ASSERT_EQ(rule.rbpSlot, 2u);
    }
    std::vector<void*> walks[3];
    uint64_t replayed[3] = {};
    std::thread([&] {
        uint64_t s[32] = {};
        auto at = [&](int i) { return reinterpret_cast<uint64_t>(&s[i]); };
        // Frame 0 (r): rbp = &s[2]; saved rbp s[2], return address s[3].
        s[2] = at(6), s[3] = r;     // frame 1 (r): rbp &s[6]
        s[6] = at(10), s[7] = x;    // frame 2 (x): rbp &s[10]
        s[10] = at(12), s[11] = 0;  // the outermost: a null return address
        s[14] = at(18), s[15] = r;  // frame 2 once s[2] says &s[14]: r
        s[18] = at(20), s[19] = 0;
        const uint64_t regs[3] = {r, at(0), at(2)};
        ThreadState* ts = threadState();
        for (int i = 0; i < 3; ++i) {
            if (i == 2) s[2] = at(14);  // only the saved rbp of frame 0 changes
            const uint64_t before = ts->walkMemo.replays;
            void* out[8];
            const int n = memtool_cfi_walk(out, 8, regs, ts);
            replayed[i] = ts->walkMemo.replays - before;
            if (n > 0) walks[i].assign(out, out + n);
        }
    }).join();
    const auto frames = [](std::initializer_list<uint64_t> ips) {
        std::vector<void*> v;
        for (uint64_t ip : ips) v.push_back(reinterpret_cast<void*>(ip));
        return v;
    };
    EXPECT_EQ(walks[0], frames({r, r, x}));
    EXPECT_EQ(walks[1], frames({r, r, x}));
    EXPECT_EQ(walks[2], frames({r, r, r}));
    EXPECT_EQ(replayed[0], 0u);
    EXPECT_EQ(replayed[1], 1u);  // the memo is asked: the same registers
    EXPECT_EQ(replayed[2], 0u);
}

// The engine's walks write into the memo's own frames: kept there, replayed
// there without a copy, and each result names the kept walk it is (resultSerial),
// which the stack interner trusts instead of comparing frames. A walk that reads
// differently is a new serial; one that fails names none.
TEST(CfiUnwinder, AWalkIntoItsMemoNamesTheKeptWalkItGives) {
    const uint64_t r = pcInRbpFrame(8), x = pcInOtherRbpFrame(8);
    ASSERT_NE(r, x);
    uint64_t serial[4] = {}, frames[4][3] = {};
    int got[4] = {};
    std::thread([&] {
        uint64_t s[32] = {};
        auto at = [&](int i) { return reinterpret_cast<uint64_t>(&s[i]); };
        s[2] = at(6), s[3] = r;  // the stack of WalksAgainWhenOnlyARestoredRbpChanged
        s[6] = at(10), s[7] = x;
        s[10] = at(12), s[11] = 0;
        s[14] = at(18), s[15] = r;
        s[18] = at(20), s[19] = 0;
        const uint64_t regs[3] = {r, at(0), at(2)};
        ThreadState* ts = threadState();
        void** out = reinterpret_cast<void**>(ts->walkMemo.ips);
        for (int i = 0; i < 4; ++i) {
            if (i == 2) s[2] = at(14);  // a slot the walk read changes
            if (i == 3) s[15] = 0x10;   // a return address with no rule: the walk fails
            got[i] = memtool_cfi_walk(out, kWalkRoom, regs, ts);
            serial[i] = ts->walkMemo.resultSerial;
            for (int k = 0; k < 3 && k < got[i]; ++k) frames[i][k] = ts->walkMemo.ips[k];
        }
    }).join();
    EXPECT_EQ(got[0], 3);
    EXPECT_EQ(got[1], 3);
    EXPECT_EQ(got[2], 3);
    EXPECT_EQ(got[3], -1);
    EXPECT_NE(serial[0], 0u);
    EXPECT_EQ(serial[1], serial[0]);  // replayed in place
    EXPECT_EQ(serial[2], serial[0] + 1);
    EXPECT_EQ(serial[3], 0u);
    const uint64_t first[3] = {r, r, x}, changed[3] = {r, r, r};
    EXPECT_TRUE(std::equal(first, first + 3, frames[0]));
    EXPECT_TRUE(std::equal(first, first + 3, frames[1]));
    EXPECT_TRUE(std::equal(changed, changed + 3, frames[2]));
}

namespace {
volatile int gSiteSet = 0;

// walkFromEverySite's walks from call sites of its own: code no walk of this
// process has run before (the store keeps identical-code folding off it).
template <int Set, int... N>
__attribute__((noinline)) int walkFromNewSites(std::integer_sequence<int, N...>) {
    gSiteSet = Set;
    int walked = 0;
    ((walked += walkFromSite<N>() > 0), ...);
    return walked;
}

struct ChildWalk {
    uint64_t reads = 0;
    int walked = 0;
};

// Forks a child that walks from the new sites and says how many rules it read.
__attribute__((noinline)) ChildWalk walkInAChild() {
    int fds[2];
    if (pipe(fds) != 0) return {};
    const pid_t pid = fork();
    if (pid == 0) {
        ChildWalk w;
        const uint64_t before = ruleReads();
        w.walked = walkFromNewSites<1>(std::make_integer_sequence<int, kSites>());
        w.reads = ruleReads() - before;
        const ssize_t n = write(fds[1], &w, sizeof w);
        _exit(n == static_cast<ssize_t>(sizeof w) ? 0 : 1);
    }
    close(fds[1]);
    ChildWalk w;
    const ssize_t n = read(fds[0], &w, sizeof w);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (n != static_cast<ssize_t>(sizeof w) || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return {};
    return w;
}
}  // namespace

// A fork pool's workers run code their parent never ran: once the process
// shares its rules with its forks, what the first worker read from .eh_frame
// the next one finds without reading. (Both are forked from one call site, so
// that every frame of their walks is the same code address.)
TEST(CfiUnwinder, AForkTreeReadsEachRuleOnce) {
    shareRulesWithForks();
    ChildWalk walks[2];
    volatile int count = 2;  // a loop the compiler cannot unroll into two call sites
    for (int i = 0; i < count; ++i) walks[i] = walkInAChild();
    EXPECT_EQ(walks[0].walked, kSites);
    EXPECT_EQ(walks[1].walked, kSites);
    EXPECT_GE(walks[0].reads, uint64_t{kSites});
    EXPECT_EQ(walks[1].reads, 0u);
}

// Shared rules are keyed by the module's build ID: one per module, the same for
// every address in it, none where no module is.
TEST(CfiUnwinder, ModulesAreKnownByTheirBuildIds) {
    const uint64_t self = moduleIdentity(reinterpret_cast<const void*>(&walkBoth));
    const uint64_t libc = moduleIdentity(reinterpret_cast<const void*>(&getpid));
    EXPECT_NE(self, 0u);
    EXPECT_NE(libc, 0u);
    EXPECT_NE(self, libc);
    // (Not fork: a sanitizer's interceptor of it lies in the test binary.)
    EXPECT_EQ(moduleIdentity(reinterpret_cast<const void*>(&getppid)), libc);
    EXPECT_EQ(moduleIdentity(reinterpret_cast<const void*>(uintptr_t{16})), 0u);
}
