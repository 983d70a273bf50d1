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

#include <cstddef>
#include <cstdint>

namespace memtool::collectors {
class Engine;
class SocketSink;
}  // namespace memtool::collectors

namespace memtool::collectors::control {

class Courtesy;
class LiveTensors;
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

private:
    Regions& regions_;
    Courtesy* courtesy_;
    LiveTensors* tensors_;
};

// Starts the thread for one stream. False when it cannot be started (the
// program runs on; `memtool ctl` then gets no answer from this process).
bool startControlThread(SocketSink& sink, Engine& engine, CommandHandler& handler);

// Decodes Request records from a byte buffer (exposed for tests): calls
// onRequest(id, argc, argv) for each complete one and returns the bytes used;
// -1 on bytes that can never be a request.
using RequestCallback = void (*)(void* context, uint64_t id, size_t argc, const char* const* argv);
long decodeRequests(uint8_t* data, size_t len, RequestCallback onRequest, void* context);

}  // namespace memtool::collectors::control
