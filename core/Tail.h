#pragma once
// The collector's send buffer, shared with `memtool run`.

#include <cstddef>
#include <cstdint>

#include "core/Protocol.h"

namespace memtool::core {

// The collector's send buffer lives in memory it shares with `memtool run` (a
// memfd passed with the stream's first bytes, SCM_RIGHTS): when a process dies
// without its End record (SIGKILL, the kernel's OOM killer), the CLI reads from
// it the records the process had not sent yet. The header comes first; the
// buffer starts at kTailHeaderBytes. The CLI reads it as untrusted input: what
// it takes from it goes through the decoder like any stream byte.
//
// Beside them, the counts an End record would carry, as of the last record
// written: where the stream and the buffer hold exactly that many records,
// allocations and frees, and nothing was missed, the process's trace is whole
// although it was killed (a pool's worker ended by SIGTERM). Each count is
// written after what it counts, so a kill between the two leaves them unequal:
// never whole by mistake.
// The buffer has two halves: the collector folds the records of one into the
// other before it sends them (collectors/engine/WindowCompactor.h), and `half` says
// which one holds the records; each half has its own `used` and `records`,
// written before `half` names it.
struct TailHeader {
    uint64_t magic = 0;        // kTailMagic
    uint64_t bufferStart = 0;  // the stream offset of the buffer's first byte
    uint64_t half = 0;         // 0 or 1: the half that is the buffer
    uint64_t used[2] = {};     // bytes of whole records in the buffer
    uint64_t deferred = 0;     // 1: deferredAlloc is the stream's last record, held back
    AllocFields deferredAlloc;
    uint64_t records[2] = {};  // every record of the stream so far, the handshake included
    uint64_t allocs = 0;
    uint64_t frees = 0;
    uint64_t missed = 0;  // events seen and not recorded
};
inline constexpr uint64_t kTailMagic = 0x4c494154'4d454d33ULL;  // "3MEMTAIL", little-endian
inline constexpr size_t kTailHeaderBytes = 4096;
inline constexpr size_t kTailBufferBytes = 256 * 1024;  // the collector's RecordWriter buffer
// The memfd: the header, then the two halves.
inline constexpr size_t kTailMemfdBytes = kTailHeaderBytes + 2 * kTailBufferBytes;
static_assert(sizeof(TailHeader) <= kTailHeaderBytes);

}  // namespace memtool::core
