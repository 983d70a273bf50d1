#pragma once
// The collector's one way to speak: a "memtool: " line on stderr, written with
// write(2) (hooks may run where stdio's locks are held, and stdio allocates).
//
// MEMTOOL_LOG=debug adds "memtool[debug] PID: " lines saying what the collector
// decided and why, at the moments it decides: start-up, the connection, the native
// unwinder, the allocators it patched, the CUDA route, fork, exec, the end of the
// stream, each control command. Never from an allocation hook: a line is built in
// a buffer on the stack (no heap, no stdio) and written with one write(2), so lines
// of several threads or processes do not interleave.

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>

namespace memtool::collectors {

inline void warn(const char* message) {
    const char prefix[] = "memtool: ";
    ssize_t ignored = write(STDERR_FILENO, prefix, sizeof prefix - 1);
    ignored = write(STDERR_FILENO, message, std::strlen(message));
    ignored = write(STDERR_FILENO, "\n", 1);
    (void)ignored;
}

// Set once, from MEMTOOL_LOG, before any thread of the collector's runs.
inline constinit std::atomic<bool> gDebugLog{false};

inline bool debugLogOn() { return gDebugLog.load(std::memory_order_relaxed); }

// MEMTOOL_LOG's value: "debug" turns the debug lines on; unset, "" and "warn" leave
// warnings only; anything else is said once and leaves warnings only.
inline void setLogLevel(const char* value) {
    if (value && std::strcmp(value, "debug") == 0) {
        gDebugLog.store(true, std::memory_order_relaxed);
        return;
    }
    gDebugLog.store(false, std::memory_order_relaxed);
    if (!value || !*value || std::strcmp(value, "warn") == 0) return;
    char line[160] = "MEMTOOL_LOG=";
    std::strncat(line, value, 64);
    std::strncat(line, ": unknown level (debug or warn); warnings only",
                 sizeof line - std::strlen(line) - 1);
    warn(line);
}

// One debug line: DebugLine().add("connected, stream of pid ").add(pid); written
// when it goes out of scope. Longer text is cut at the buffer's end.
class DebugLine {
public:
    DebugLine() {
        add("memtool[debug] ");
        add(static_cast<uint64_t>(getpid()));
        add(": ");
    }
    ~DebugLine() {
        buf_[used_++] = '\n';  // room kept: add() stops one byte short
        ssize_t ignored = write(STDERR_FILENO, buf_, used_);
        (void)ignored;
    }
    DebugLine(const DebugLine&) = delete;
    DebugLine& operator=(const DebugLine&) = delete;

    DebugLine& add(const char* text) {
        if (!text) text = "(null)";
        while (*text && used_ < kRoom) buf_[used_++] = *text++;
        return *this;
    }
    DebugLine& add(uint64_t n) {
        char digits[20];
        int k = 0;
        do {
            digits[k++] = static_cast<char>('0' + n % 10);
            n /= 10;
        } while (n);
        while (k && used_ < kRoom) buf_[used_++] = digits[--k];
        return *this;
    }

private:
    static constexpr size_t kSize = 512;
    static constexpr size_t kRoom = kSize - 1;  // the newline's byte
    char buf_[kSize];
    size_t used_ = 0;
};

}  // namespace memtool::collectors
