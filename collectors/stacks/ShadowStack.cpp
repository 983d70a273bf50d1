#include "collectors/stacks/ShadowStack.h"

#include <atomic>

namespace memtool::collectors {

namespace {
std::atomic<LineReader> gLineReader{nullptr};
std::atomic<PythonStackReader> gStackReader{nullptr};
}  // namespace

void setPythonStackReader(PythonStackReader reader) { gStackReader.store(reader); }

ShadowStack* readPythonStack(ThreadState& ts, uint64_t generation, uint32_t* firstStale) {
    PythonStackReader read = gStackReader.load(std::memory_order_acquire);
    return read ? read(ts, generation, firstStale) : nullptr;
}

void setLineReader(LineReader reader) { gLineReader.store(reader); }

uint32_t currentLine(void* frame) {
    LineReader read = gLineReader.load(std::memory_order_relaxed);
    int line = read ? read(frame) : 0;
    return line < 0 ? 0 : static_cast<uint32_t>(line);
}

uint32_t refreshLines(ShadowStack& s, uint64_t generation) {
    const uint32_t n = s.recorded();
    if (s.generation != generation) {
        for (uint32_t i = 0; i < n; ++i) s.frames[i].node = 0;
        s.generation = generation;
    }
    uint32_t first = n;
    for (uint32_t i = 0; i < n; ++i) {
        ShadowFrame& f = s.frames[i];
        if (i > first) {  // inside a frame whose prefix changed: its node changes too
            f.line = currentLine(f.frame);
            f.node = 0;
            continue;
        }
        // The innermost frame keeps executing between allocations: always re-read it.
        const bool innermost = i + 1 == s.depth;
        if (!innermost && f.node != 0) continue;
        const uint32_t line = currentLine(f.frame);
        if (line == f.line && f.node != 0) continue;
        f.line = line;
        f.node = 0;
        first = i;
    }
    return first;
}

}  // namespace memtool::collectors
