#pragma once
// The control thread: reads requests that `memtool run` sends down the
// collector's own socket (core/PROTOCOL.md, Request), runs them one at a time,
// and answers up the stream (Reply). It starts when the stream does and ends
// when the stream is closed (the sink's shutdown wakes its read).
//
// It blocks every signal (they are the program's) and holds the recursion guard
// for its whole life, so nothing it does is recorded as the program's. It never
// holds the engine's lock across a device call: commands go through Regions,
// which takes its own locks and calls the engine only to record.

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace memtool::collectors {
class Engine;
class SocketSink;
}  // namespace memtool::collectors

namespace memtool::collectors::control {

class Collection;
class Courtesy;
class LiveTensors;
class SafePoint;
class Regions;

// What a request asks for, and how to answer it. Commands are argv-like:
// "status", "pause [TAG...]", "resume [TAG...]".
class CommandHandler {
public:
    virtual ~CommandHandler() = default;
    // Writes the JSON answer into `out` (at most `size` bytes) and returns its status.
    virtual uint8_t handle(size_t argc, const char* const* argv, char* out, size_t size) = 0;
    // A command whose answer has no size bound replies to request `id` itself
    // (through `engine`) and returns true; false leaves it to handle().
    virtual bool replies(size_t argc, const char* const* argv, Engine& engine, uint64_t id) {
        return false;
    }
    // The stream ended: no more requests, and no one left to answer.
    virtual void streamEnded() {}
};

// The memory-control commands: status, pause and resume of regions, and yield
// and restore of the whole program (Courtesy).
class RegionCommands final : public CommandHandler {
public:
    constexpr RegionCommands(Regions& regions, Courtesy* courtesy = nullptr,
                             LiveTensors* tensors = nullptr)
        : regions_(regions), courtesy_(courtesy), tensors_(tensors) {}
    uint8_t handle(size_t argc, const char* const* argv, char* out, size_t size) override;
    // "tensors": listed by the program's Python, answered whatever its size.
    bool replies(size_t argc, const char* const* argv, Engine& engine, uint64_t id) override;
    // A program yielded from outside is not left parked for good.
    void streamEnded() override;
    // "detach" (memtool attach's end): asks `detacher` to end the track; false with
    // the reason where it cannot. Set by the composition root before the stream.
    void setDetacher(bool (*detacher)(const char** why)) { detacher_ = detacher; }
    // "gc" (Collection), and the safe point a pause with --park waits at.
    void setCollection(Collection* collection) { collection_ = collection; }
    void setSafePoint(SafePoint* safePoint) { safePoint_ = safePoint; }

private:
    bool (*detacher_)(const char** why) = nullptr;
    Regions& regions_;
    Courtesy* courtesy_;
    LiveTensors* tensors_;
    Collection* collection_ = nullptr;
    SafePoint* safePoint_ = nullptr;
};

// The thread for one stream: started now where `atOnce` (a process other than the
// program memtool run started, which may still run, quiet, when memtool run stops
// waiting for it; a run with a live view or --pausable all, whose state must reach
// memtool run while the program is quiet) or the process has threads already;
// else when it is first needed.
//
// A second thread, even an idle one, makes glibc and libstdc++ take their
// thread-safe paths in the program's own code for good: posix_memalign takes its
// arena's lock (49 against 80 ns an allocation and free here), and small_tensors
// runs ~2% slower (bench/history/runs.md, run 32). So a single-threaded program gets
// the thread when
//   - it starts a thread of its own (pthread_create, interposed);
//   - a request arrives: the socket signals its thread (SIGURG, with O_ASYNC),
//     whose handler starts ours where the thread sleeps in a system call (no
//     lock or state of the C library can be held there by the only thread),
//     and otherwise leaves it to the program's next allocation or free (which
//     calls startIfWanted()), trying again on a 2 ms timer meanwhile;
//   - it declares a region (startControlThreadNow()).
// Until then, records a quiet program left in the buffer wait for its next event
// (or its end); every reply flushes them first.
// False when the thread cannot be made (the program runs on; `memtool ctl` then
// gets no answer from this process).
bool startControlThread(SocketSink& sink, Engine& engine, CommandHandler& handler, bool atOnce);
// Starts the thread of the current stream if it waits to be started; true when
// this call started it.
bool startControlThreadNow();
// Called by the allocation hooks: starts it where a request asked for it.
extern std::atomic<bool> gControlWanted;
inline void startIfWanted() {
    if (__builtin_expect(gControlWanted.load(std::memory_order_relaxed), 0))
        startControlThreadNow();
}
// The program is inside dlopen or dlclose (the loader's state is in flux):
// no thread is started from the signal handler then.
void enterLoader();
void leaveLoader();
// In a fork child: the parent's thread is not there, nor its wake-up.
void forgetControlThread();

// memtool.track's streams: their control thread is joinable, and the track's end
// (after the stream is closed, which ends the thread's reading) waits for it to
// be gone, so that a hundred tracks leave no thread behind.
void setControlThreadJoinable(bool joinable);
void endControlThread();

// Decodes Request records from a byte buffer (exposed for tests): calls
// onRequest(id, argc, argv) for each complete one, onReject(id, why) for each
// complete one over a limit of core/CtlArgs.h (no words, too many or too long, a NUL byte in a
// word), and returns the bytes used; -1 on bytes that can never be a request.
using RequestCallback = void (*)(void* context, uint64_t id, size_t argc, const char* const* argv);
using RejectCallback = void (*)(void* context, uint64_t id, const char* why);
long decodeRequests(uint8_t* data, size_t len, RequestCallback onRequest, RejectCallback onReject,
                    void* context);

}  // namespace memtool::collectors::control
