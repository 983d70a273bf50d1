#include "collectors/control/ControlChannel.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "collectors/control/Collection.h"
#include "collectors/control/Courtesy.h"
#include "collectors/control/JsonWriter.h"
#include "collectors/control/LiveTensors.h"
#include "collectors/control/OwnThread.h"
#include "collectors/control/PausedAccess.h"
#include "collectors/control/Regions.h"
#include "collectors/control/SafePoint.h"
#include "collectors/control/SignalChain.h"
#include "collectors/engine/Engine.h"
#include "collectors/engine/RecursionGuard.h"
#include "collectors/engine/SocketSink.h"
#include "collectors/engine/Warn.h"
#include "collectors/stacks/CPythonApi.h"
#include "core/CtlArgs.h"
#include "core/Protocol.h"

#if __has_include(<sys/single_threaded.h>)
#include <sys/single_threaded.h>
#define MEMTOOL_HAVE_SINGLE_THREADED 1
#else
#define MEMTOOL_HAVE_SINGLE_THREADED 0
#endif

namespace memtool::collectors::control {

namespace {

using core::kMaxRequestWords;
using core::kMaxWordBytes;
static_assert(kMaxRequestWords == 65 && kMaxWordBytes == 4096,
              "decodeRequests' refusals name the limits");

// A request is argv-sized (kMaxRequestWords words of kMaxWordBytes at most): far
// less than this, and memtool run never sends one over 64 KiB.
constexpr size_t kInputBytes = 64 * 1024;
// JSON answers: 256 regions described take about 40 KiB. The buffer is touched
// once at start, so that answering (a pause, say) grows the process by nothing.
constexpr size_t kAnswerBytes = 64 * 1024;

bool readVarint(const uint8_t*& p, const uint8_t* end, uint64_t* v, bool* bad) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (p >= end) return false;
        const uint8_t b = *p++;
        *v |= static_cast<uint64_t>(b & 0x7f) << shift;
        if (!(b & 0x80)) return true;
    }
    *bad = true;
    return false;
}

struct Channel {
    SocketSink* sink;
    Engine* engine;
    CommandHandler* handler;
    char* answer;  // kAnswerBytes, from mmap
};

void answer(void* context, uint64_t id, size_t argc, const char* const* argv) {
    auto* c = static_cast<Channel*>(context);
    if (c->handler->replies(argc, argv, *c->engine, id)) return;
    const uint8_t status = c->handler->handle(argc, argv, c->answer, kAnswerBytes);
    c->engine->reply(id, static_cast<core::ReplyStatus>(status), c->answer, std::strlen(c->answer));
}

// A request over a limit: refused, with the limit, and the channel goes on.
void refuse(void* context, uint64_t id, const char* why) {
    auto* c = static_cast<Channel*>(context);
    JsonWriter j(c->answer, kAnswerBytes);
    j.open('{');
    j.key("error").value(why);
    j.close('}');
    c->engine->reply(id, core::ReplyStatus::Failed, c->answer, std::strlen(c->answer));
}

// Touches the first `bytes` of this thread's stack below here, so that running a
// command later (a pause, whose point is to shrink the process) grows nothing.
__attribute__((noinline)) void prefaultStack(size_t bytes) {
    volatile char* p = static_cast<volatile char*>(__builtin_alloca(bytes));
    for (size_t i = 0; i < bytes; i += 4096) p[i] = 0;
}

void* run(void* arg) {
    RecursionGuard ours;  // nothing this thread does is the program's
    prefaultStack(64 * 1024);
    // The C library gives a thread its own malloc arena on its first malloc (a
    // failed dlsym's message, say): made now, not in the middle of a pause.
    void* volatile first = std::malloc(1);  // volatile: the pair is not optimized away
    std::free(first);
    auto* c = static_cast<Channel*>(arg);
    uint8_t* input = static_cast<uint8_t*>(
        mmap(nullptr, kInputBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (input == MAP_FAILED) return nullptr;
    std::memset(input, 0, kInputBytes);  // resident now, not in the middle of a pause
    size_t used = 0;
    const int fd = c->sink->acquire();
    while (fd >= 0) {
        // A program that closed the descriptor and got its number back for a
        // socket of its own: never read its data (the writer stops too).
        if (!c->sink->stillOurs()) break;
        // Between requests, records the program left in the buffer go out within
        // about the flush interval.
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, 100) == 0) {
            c->engine->flushIfStale();
            continue;
        }
        ssize_t n = read(fd, input + used, kInputBytes - used);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;  // end of stream: the CLI went away or the collector closed it
        used += static_cast<size_t>(n);
        const long consumed = decodeRequests(input, used, answer, refuse, c);
        if (consumed < 0 || (consumed == 0 && used == kInputBytes))
            break;  // not requests: stop listening
        std::memmove(input, input + consumed, used - static_cast<size_t>(consumed));
        used -= static_cast<size_t>(consumed);
    }
    if (fd >= 0) c->sink->release();
    c->handler->streamEnded();
    munmap(input, kInputBytes);
    munmap(c->answer, kAnswerBytes);
    munmap(c, sizeof *c);
    return nullptr;
}

// A pause's or resume's words: its tags (none: every tag) and its options,
// `--to host|disk` (a pause's content goes there whatever the region's own backup
// says), `--park` (the pause waits for the program at a safe point and keeps it
// there while it runs), `--policy` (a policy's rule asks: recorded as such).
struct TagWords {
    const char* tags[kMaxRequestWords];
    size_t count = 0;
    bool park = false;
    core::ControlOrigin origin = core::ControlOrigin::Ctl;
    bool forced = false;
    ForcedBackup backup;
    const char* error = nullptr;
};

TagWords tagWords(bool pause, size_t argc, const char* const* argv) {
    TagWords w;
    for (size_t i = 1; i < argc; ++i) {
        const char* a = argv[i];
        if (std::strcmp(a, "--policy") == 0) {
            w.origin = core::ControlOrigin::Policy;
        } else if (pause && std::strcmp(a, "--park") == 0) {
            w.park = true;
        } else if (pause && std::strcmp(a, "--to") == 0 && i + 1 < argc &&
                   (std::strcmp(argv[i + 1], "host") == 0 ||
                    std::strcmp(argv[i + 1], "disk") == 0)) {
            w.forced = true;
            // CPU memory has no host backup to go to: disk either way.
            w.backup.cuda = std::strcmp(argv[++i], "host") == 0 ? core::BackupKind::Host
                                                                : core::BackupKind::Disk;
        } else if (a[0] == '-' && a[1] == '-') {
            w.error = pause ? "pause takes [TAG...] [--to host|disk] [--park] [--policy]"
                            : "resume takes [TAG...] [--policy]";
        } else {
            w.tags[w.count++] = a;
        }
    }
    return w;
}

constexpr uint64_t kParkWaitNs = 10'000'000'000;

// Each of the words' tags in turn, or every tag.
uint8_t runOnTagWords(Regions& regions, bool pause, const TagWords& w, char* out, size_t size) {
    JsonWriter j(out, size);
    j.open('{');
    j.key("action").value(pause ? "pause" : "resume");
    j.key("results").open('[');
    bool ok = true;
    uint64_t bytes = 0;
    double seconds = 0;
    // No tag: every tag at once.
    for (size_t i = 0; i < (w.count ? w.count : 1); ++i) {
        const char* tag = w.count ? w.tags[i] : nullptr;
        OpResult r = pause ? regions.pause(tag, w.origin, core::ControlAction::Pause,
                                           w.forced ? &w.backup : nullptr)
                           : regions.resume(tag, w.origin);
        ok &= r.ok;
        bytes += r.bytes;
        seconds += r.seconds;
        j.open('{');
        j.key("tag").value(tag ? tag : "*");
        j.key("ok").value(r.ok);
        j.key("changed").value(r.changed);
        j.key("bytes").value(r.bytes);
        r.writeLetGo(j);
        r.writePlaces(j);
        j.key("regions").value(static_cast<uint64_t>(r.regions));
        j.key("allocations").value(r.allocations);
        j.key("seconds").value(r.seconds);
        j.key("message").value(r.message);
        j.close('}');
    }
    j.close(']');
    j.key("ok").value(ok);
    j.key("bytes").value(bytes);
    j.key("seconds").value(seconds);
    j.close('}');
    return static_cast<uint8_t>(ok ? core::ReplyStatus::Ok : core::ReplyStatus::Failed);
}

// A pause or resume request: its words read, the program parked first where asked.
uint8_t runOnTags(Regions& regions, SafePoint* safePoint, bool pause, size_t argc,
                  const char* const* argv, char* out, size_t size) {
    const TagWords w = tagWords(pause, argc, argv);
    const char* refusal = w.error;
    if (!refusal && w.park && !safePoint) refusal = "this process offers no safe points";
    bool parked = false;
    if (!refusal && w.park) {
        switch (safePoint->park(kParkWaitNs)) {
            case SafePoint::Outcome::Parked:
                parked = true;
                break;
            case SafePoint::Outcome::TimedOut:
                refusal = "the program reached no safe point within 10 s: nothing paused";
                break;
            case SafePoint::Outcome::NoSafePoints:
                refusal =
                    "the program offers no safe points (no Python, no memtool_safe_point): a "
                    "policy pauses it only if its policy lists the tag in any_time";
                break;
            default:
                refusal = "the program is parked for something else: nothing paused";
                break;
        }
    }
    if (refusal) {
        JsonWriter j(out, size);
        j.open('{');
        j.key("ok").value(false);
        j.key("message").value(refusal);
        j.close('}');
        return static_cast<uint8_t>(core::ReplyStatus::Failed);
    }
    const uint8_t status = runOnTagWords(regions, pause, w, out, size);
    if (parked) safePoint->release();
    return status;
}

}  // namespace

long decodeRequests(uint8_t* data, size_t len, RequestCallback onRequest, RejectCallback onReject,
                    void* context) {
    const uint8_t* p = data;
    const uint8_t* end = data + len;
    bool bad = false;
    while (p < end) {
        const uint8_t* start = p;
        if (*p++ != static_cast<uint8_t>(core::RecordTag::Request)) return -1;
        uint64_t id = 0, argc = 0;
        if (!readVarint(p, end, &id, &bad) || !readVarint(p, end, &argc, &bad))
            return bad ? -1 : start - data;
        // Every word's length comes before its bytes: a request over a limit is
        // still framed, so it is answered with what is wrong and the next one read.
        // Only the first kMaxRequestWords are kept.
        uint8_t* words[kMaxRequestWords];  // where each word's length begins
        uint64_t lengths[kMaxRequestWords];
        const uint8_t* strings[kMaxRequestWords];
        uint64_t longest = 0;
        for (uint64_t i = 0; i < argc; ++i) {
            uint8_t* word = data + (p - data);
            uint64_t length = 0;
            if (!readVarint(p, end, &length, &bad)) return bad ? -1 : start - data;
            if (static_cast<uint64_t>(end - p) < length) return start - data;
            if (i < kMaxRequestWords) {
                words[i] = word;
                lengths[i] = length;
                strings[i] = p;
            }
            longest = length > longest ? length : longest;
            p += length;
        }
        const char* why = nullptr;
        if (argc == 0)
            why = "a request with no command";
        else if (argc > kMaxRequestWords)
            why = "a request of more than 65 words (64 tags)";
        else if (longest > kMaxWordBytes)
            why = "a word of more than 4096 bytes";
        // NUL-terminated in place: each word moves back over its own length (one
        // byte at least), which leaves room for its NUL before the next word's.
        const char* argv[kMaxRequestWords];
        for (uint64_t i = 0; !why && i < argc; ++i) {
            std::memmove(words[i], strings[i], lengths[i]);
            words[i][lengths[i]] = '\0';
            argv[i] = reinterpret_cast<const char*>(words[i]);
            if (std::strlen(argv[i]) != lengths[i]) why = "a word with a NUL byte in it";
        }
        if (why) {
            if (debugLogOn())
                DebugLine().add("control request ").add(id).add(" refused: ").add(why);
            onReject(context, id, why);
            continue;
        }
        if (debugLogOn()) {
            DebugLine line;
            line.add("control request ").add(id).add(":");
            for (size_t i = 0; i < argc; ++i) line.add(" ").add(argv[i]);
        }
        onRequest(context, id, argc, argv);
    }
    return static_cast<long>(p - data);
}

uint8_t RegionCommands::handle(size_t argc, const char* const* argv, char* out, size_t size) {
    const char* command = argv[0];
    if (std::strcmp(command, "status") == 0 && argc == 1) {
        // {"regions": [...], "host_pool_bytes": N, "memory_margin_bytes": M,
        // "threads_waiting": T[, "host_budget_bytes": B]}: describe() writes the
        // array in place, the rest follows it. T: threads that touched yielded
        // memory and wait for restore; B only where a host budget is set.
        static const char head[] = "{\"regions\":";
        const size_t headBytes = sizeof head - 1;
        constexpr size_t kTailBytes = 192;  // the four figures and the closing brace
        const size_t n = size > headBytes + kTailBytes
                             ? regions_.describe(out + headBytes, size - headBytes - kTailBytes)
                             : 0;
        if (n == 0) {
            std::snprintf(out, size, "{\"error\":\"the answer does not fit in %zu bytes\"}", size);
            return static_cast<uint8_t>(core::ReplyStatus::Failed);
        }
        std::memcpy(out, head, headBytes);
        const size_t tail = headBytes + n;
        const int written =
            std::snprintf(out + tail, size - tail,
                          ",\"host_pool_bytes\":%" PRIu64 ",\"memory_margin_bytes\":%" PRIu64
                          ",\"threads_waiting\":%" PRIu32,
                          regions_.hostPoolBytes(), regions_.memoryMargin(), threadsWaiting());
        const uint64_t budget = regions_.hostBudget();
        if (budget != UINT64_MAX)
            std::snprintf(out + tail + written, size - tail - written,
                          ",\"host_budget_bytes\":%" PRIu64 "}", budget);
        else
            std::snprintf(out + tail + written, size - tail - written, "}");
        return static_cast<uint8_t>(core::ReplyStatus::Ok);
    }
    if (std::strcmp(command, "ping") == 0 &&
        argc == 1) {  // memtool run's barrier: all records so far precede it
        std::snprintf(out, size, "{\"ok\":true}");
        return static_cast<uint8_t>(core::ReplyStatus::Ok);
    }
    if (std::strcmp(command, "detach") == 0 && argc == 1) {
        const char* why = "this process was not attached by memtool attach";
        JsonWriter j(out, size);
        j.open('{');
        const bool ok = detacher_ && detacher_(&why);
        if (ok)
            j.key("ok").value(true);
        else
            j.key("error").value(why);
        j.close('}');
        return static_cast<uint8_t>(ok ? core::ReplyStatus::Ok : core::ReplyStatus::Failed);
    }
    if (courtesy_ && std::strcmp(command, "yield") == 0)
        return courtesy_->yieldCommand(argc, argv, out, size);
    if (courtesy_ && std::strcmp(command, "restore") == 0 && argc == 1)
        return courtesy_->restoreCommand(out, size);
    if (std::strcmp(command, "pause") == 0)
        return runOnTags(regions_, safePoint_, true, argc, argv, out, size);
    if (std::strcmp(command, "resume") == 0)
        return runOnTags(regions_, safePoint_, false, argc, argv, out, size);
    if (std::strcmp(command, "spill") == 0 && argc == 1) {
        const OpResult r = regions_.spillHostBackups();
        r.toJson("spill", out, size);
        return static_cast<uint8_t>(r.ok ? core::ReplyStatus::Ok : core::ReplyStatus::Failed);
    }
    if (collection_ && std::strcmp(command, "gc") == 0)
        return collection_->command(argc, argv, out, size);
    JsonWriter j(out, size);
    j.open('{');
    j.key("error").value("unknown command");
    j.key("command").value(command);
    j.close('}');
    return static_cast<uint8_t>(core::ReplyStatus::Unknown);
}

bool RegionCommands::replies(size_t argc, const char* const* argv, Engine& engine, uint64_t id) {
    if (!tensors_ || std::strcmp(argv[0], "tensors") != 0) return false;
    tensors_->command(argc, argv, engine, id);
    return true;
}

void RegionCommands::streamEnded() {
    if (courtesy_) courtesy_->abandon();
    // An attached process whose memtool went away is detached all the same.
    const char* why = nullptr;
    if (detacher_) detacher_(&why);
}

std::atomic<bool> gControlWanted{false};

namespace {

// The current stream's thread: made (kArmed) and waiting to start, or started.
enum : int { kNone = 0, kArmed = 1, kStarted = 2 };
std::atomic<int> gState{kNone};
Channel* gArmed = nullptr;
// memtool.track's streams: the thread is joined when the stream ends.
bool gJoinable = false;
bool gJoinPending = false;
pthread_t gThread{};
std::atomic<int> gWakeFd{-1};  // the socket that signals its thread, while armed
timer_t gRetry;
bool gHaveRetry = false;
int gRetryTag;  // the retry timer's signals carry its address
std::atomic<int> gInLoader{0};
struct sigaction gPrevious;
bool gHandlerSet = false;
// A Python main thread that runs only Python makes no system call and may make
// no allocation for long: the interpreter runs a pending call of ours between two
// bytecodes instead (asked once from the handler, on that thread itself, so that
// the interpreter sees it: from another thread 3.11 and 3.12 do not look). The
// interpreter takes its queue's lock to add it; the thread holds that lock only
// while it takes a pending call out, and nothing of ours is queued before this.
CPythonApi gWakePython;
bool gWakeHasPython = false;
std::atomic<bool> gAskedPython{false};
std::atomic<int> gRetries{0};

int startFromPython(void*) {
    startControlThreadNow();
    return 0;
}

bool singleThreaded() {
#if MEMTOOL_HAVE_SINGLE_THREADED
    return __libc_single_threaded != 0;
#else
    return false;
#endif
}

// The interrupted thread sleeps in a system call: either the call returns EINTR
// (the instruction pointer just after it) or the kernel restarts it (the pointer
// back on it, the call's number in rax again). There the only thread of the
// process is in nothing that starting a thread uses: malloc makes no call that
// sleeps, the loader is excluded (enterLoader), and what does sleep (stdio
// reading a pipe, a wait) holds nothing pthread_create touches. x86-64 only;
// elsewhere the thread starts at the next allocation, free or bytecode.
bool inSleepingCall(const void* context) {
#if defined(__x86_64__)
    const auto* uc = static_cast<const ucontext_t*>(context);
    const uint64_t ip = static_cast<uint64_t>(uc->uc_mcontext.gregs[REG_RIP]);
    const int64_t ax = static_cast<int64_t>(uc->uc_mcontext.gregs[REG_RAX]);
    const auto* code = reinterpret_cast<const uint8_t*>(ip);
    const uint64_t inPage = ip & 4095;
    if (ax == -EINTR && inPage >= 2 && code[-2] == 0x0f && code[-1] == 0x05) return true;
    if (inPage <= 4094 && code[0] == 0x0f && code[1] == 0x05) {
        // The calls that can wait; a restart of any other (none sleeps) is not one.
        static constexpr long kSleeping[] = {
            SYS_read,          SYS_readv,           SYS_recvfrom,   SYS_recvmsg,
            SYS_write,         SYS_writev,          SYS_sendto,     SYS_sendmsg,
            SYS_open,          SYS_openat,          SYS_accept,     SYS_accept4,
            SYS_connect,       SYS_wait4,           SYS_waitid,     SYS_futex,
            SYS_flock,         SYS_fcntl,           SYS_msgrcv,     SYS_msgsnd,
            SYS_semop,         SYS_semtimedop,      SYS_ioctl,      SYS_pause,
            SYS_rt_sigsuspend, SYS_rt_sigtimedwait, SYS_epoll_wait, SYS_epoll_pwait,
            SYS_poll,          SYS_ppoll,           SYS_select,     SYS_pselect6,
            SYS_nanosleep,     SYS_clock_nanosleep};
        for (const long call : kSleeping)
            if (ax == call) return true;
        return false;
    }
#else
    (void)context;
#endif
    return false;
}

void onWake(int sig, siginfo_t* info, void* context) {
    const int fd = gWakeFd.load(std::memory_order_relaxed);
    const bool retry = info->si_code == SI_TIMER && info->si_value.sival_ptr == &gRetryTag;
    const bool socket =
        fd >= 0 && info->si_code >= POLL_IN && info->si_code <= POLL_HUP && info->si_fd == fd;
    if (!retry && !socket) {
        callPrevious(gPrevious, sig, info, context);  // SIGURG's default is to ignore it
        return;
    }
    // Only a request wants the thread: not room to write, nor the stream's end
    // (memtool run closing it), which no request follows.
    if ((socket && info->si_code != POLL_IN) || gState.load() != kArmed) return;
    const int savedErrno = errno;
    gControlWanted.store(true, std::memory_order_relaxed);
    if (singleThreaded() && !RecursionGuard::active && gInLoader.load() == 0 &&
        inSleepingCall(context)) {
        startControlThreadNow();
    } else {
        if (gWakeHasPython && !gAskedPython.exchange(true) && gWakePython.IsInitialized() &&
            !(gWakePython.IsFinalizing && gWakePython.IsFinalizing()))
            gWakePython.AddPendingCall(startFromPython, nullptr);
        // Every 2 ms for 10 s at most: a program that neither sleeps in a call,
        // allocates, nor runs Python for that long leaves it to its next event.
        if (gHaveRetry && gRetries.fetch_add(1) < 5000) {
            itimerspec again{};
            again.it_value.tv_nsec = 2'000'000;
            timer_settime(gRetry, 0, &again, nullptr);
        }
    }
    errno = savedErrno;
}

// The socket signals this thread when a request arrives. False when it cannot
// (the thread is then started at once).
bool armWake(SocketSink& sink) {
    const int fd = sink.acquire();
    if (fd < 0) return false;
    sink.release();  // the descriptor stays the stream's while it is open
    if (!gHandlerSet) {
        struct sigaction sa {};
        sa.sa_sigaction = onWake;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGURG, &sa, &gPrevious) != 0) return false;
        gHandlerSet = true;
    }
    // Resolved here: dlsym is no call for a signal handler.
    if (!gWakeHasPython) gWakeHasPython = gWakePython.resolvePendingCalls();
    const pid_t thread = static_cast<pid_t>(syscall(SYS_gettid));
    if (!gHaveRetry) {
        sigevent ev{};
        ev.sigev_notify = SIGEV_THREAD_ID;
        ev.sigev_signo = SIGURG;
        ev.sigev_value.sival_ptr = &gRetryTag;
        ev._sigev_un._tid = thread;  // sigev_notify_thread_id
        gHaveRetry = timer_create(CLOCK_MONOTONIC, &ev, &gRetry) == 0;
    }
    f_owner_ex owner{F_OWNER_TID, thread};
    const int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETSIG, SIGURG) != 0 || fcntl(fd, F_SETOWN_EX, &owner) != 0)
        return false;
    gWakeFd.store(fd);
    if (fcntl(fd, F_SETFL, flags | O_ASYNC) != 0) {
        gWakeFd.store(-1);
        return false;
    }
    // A request that came before the signal was asked for.
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 0) > 0) gControlWanted.store(true, std::memory_order_relaxed);
    return true;
}

}  // namespace

bool startControlThread(SocketSink& sink, Engine& engine, CommandHandler& handler, bool atOnce) {
    void* mem =
        mmap(nullptr, sizeof(Channel), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    void* answerMem =
        mmap(nullptr, kAnswerBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED || answerMem == MAP_FAILED) return false;
    auto* c = static_cast<Channel*>(mem);
    *c = Channel{&sink, &engine, &handler, static_cast<char*>(answerMem)};
    std::memset(answerMem, 0, kAnswerBytes);
    gArmed = c;
    gAskedPython.store(false);
    gRetries.store(0);
    gState.store(kArmed);
    if (atOnce || !singleThreaded() || !armWake(sink)) return startControlThreadNow();
    return true;
}

namespace {
// No more signals for requests: the socket's and the retry timer's.
void disarmWake() {
    const int fd = gWakeFd.exchange(-1);
    if (fd >= 0) {
        const int flags = fcntl(fd, F_GETFL);
        if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_ASYNC);
    }
    if (gHaveRetry) {
        itimerspec off{};
        timer_settime(gRetry, 0, &off, nullptr);
    }
}
}  // namespace

bool startControlThreadNow() {
    int armed = kArmed;
    const bool mine = gState.compare_exchange_strong(armed, kStarted);
    // Cleared either way: a wake-up that saw the thread armed can set it after
    // another thread started it, and the hooks would then try at every event.
    gControlWanted.store(false, std::memory_order_relaxed);
    if (!mine) return false;
    disarmWake();  // from here the thread reads the requests: no more signals for them
    const bool started = startOwnThread(run, gArmed, "memtool-ctl", gJoinable ? &gThread : nullptr);
    if (started && gJoinable) gJoinPending = true;
    return started;
}

void setControlThreadJoinable(bool joinable) { gJoinable = joinable; }

void endControlThread() {
    // Never started (armed only): its memory is let go of here instead.
    int armed = kArmed;
    if (gState.compare_exchange_strong(armed, kNone)) {
        Channel* c = gArmed;
        gArmed = nullptr;
        if (c) {
            munmap(c->answer, kAnswerBytes);
            munmap(c, sizeof *c);
        }
    }
    gState.store(kNone);
    disarmWake();
    if (gJoinPending) {
        gJoinPending = false;
        pthread_join(gThread, nullptr);  // the stream was closed: its reader has ended or will
    }
}

void enterLoader() { gInLoader.fetch_add(1); }
void leaveLoader() { gInLoader.fetch_sub(1); }

void forgetControlThread() {
    gState.store(kNone);
    gJoinPending = false;  // the parent's thread is not in the child
    gWakeFd.store(-1);
    gControlWanted.store(false);
    gHaveRetry = false;  // timers are not inherited
    gInLoader.store(0);
}

}  // namespace memtool::collectors::control
