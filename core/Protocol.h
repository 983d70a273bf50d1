#pragma once
// The wire protocol between a collector (inside the target) and `memtool run`.
// Layouts are documented in core/PROTOCOL.md; keep the two in step and bump
// kProtocolVersion on any change a reader of the previous version would misread.
//
// Everything here is allocation-free and exception-free so that the collector's
// hooks may use it: encoders write into a caller-provided buffer that has room
// for kMaxFixedRecordBytes (fixed records) or the size returned by the *Bytes()
// helpers (string records).

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>

namespace memtool::core {

inline constexpr char kMagic[8] = {'M', 'E', 'M', 'T', 'O', 'O', 'L', '\0'};
inline constexpr uint32_t kProtocolVersion = 11;

// Environment variables shared by the CLI and the collectors.
inline constexpr const char* kEnvSocket = "MEMTOOL_SOCKET";    // path of the CLI's Unix socket
inline constexpr const char* kEnvOptions = "MEMTOOL_OPTIONS";  // e.g. "native=0,python=1"
inline constexpr const char* kEnvTorchBridge =
    "MEMTOOL_TORCH_BRIDGE";  // path of the torch bridge library
inline constexpr const char* kEnvBackupDir =
    "MEMTOOL_BACKUP_DIR";  // where paused regions' disk backups go
inline constexpr const char* kEnvControlSocket =
    "MEMTOOL_CONTROL_SOCKET";  // memtool run's socket for memtool ctl (and the program itself)

enum class RecordTag : uint8_t {
    Handshake = 'H',
    Module = 'M',
    NativeNode = 'N',
    PyCode = 'C',
    PyNode = 'P',
    Alloc = 'A',
    Free = 'F',
    ShortLived = 'S',  // an Alloc and its Free, nothing recorded between them
    Window = 'B',      // a run of Allocs and Frees, folded by the collector (PROTOCOL.md)
    Note = 'W',
    Region = 'R',   // a pausable region (tag, device, backup)
    Control = 'X',  // a pause or resume that happened
    Reply = 'Y',    // the answer to a request
    Oom = 'O',      // an allocation that failed for want of memory
    End = 'E',
    // Down-stream, from `memtool run` to the collector, on the same socket:
    Request = 'Q',
    Admitted = 'K',  // the CLI checked the peer and reads this stream (one byte, sent first)
};

// Device codes carried in alloc/free records. CUDA ordinals follow kDeviceCudaBase;
// PyTorch's caching allocator adds two pools per device, seen through the torch
// bridge: "active" (blocks handed to tensors) and "reserved" (segments it holds).
inline constexpr uint8_t kDeviceCpu = 0;
inline constexpr uint8_t kDevicePinnedHost = 1;  // CUDA page-locked host memory
// POSIX shared memory this process created for PyTorch storages (share_memory_(),
// DataLoader batches): counted here, never in the processes that map it.
inline constexpr uint8_t kDeviceShared = 2;
inline constexpr uint8_t kMaxCudaDevices = 64;
inline constexpr uint8_t kDeviceCudaBase = 16;           // cuda:N is kDeviceCudaBase + N
inline constexpr uint8_t kDeviceCudaActiveBase = 80;     // cuda:N.active
inline constexpr uint8_t kDeviceCudaReservedBase = 144;  // cuda:N.reserved
// The caching allocator's private pools (CUDA graphs' pools, torch.cuda.MemPool),
// a part of the pools above, on the first kMaxGraphPoolDevices devices only:
// their segments (cuda:N.graphs) and the blocks handed out of them
// (cuda:N.graphs_active).
inline constexpr uint8_t kMaxGraphPoolDevices = 16;
inline constexpr uint8_t kDeviceCudaGraphsBase = 224;        // cuda:N.graphs
inline constexpr uint8_t kDeviceCudaGraphsActiveBase = 240;  // cuda:N.graphs_active

enum class DevicePool : uint8_t { Device, Active, Reserved, Graphs, GraphsActive };

inline uint8_t poolBase(DevicePool pool) {
    switch (pool) {
        case DevicePool::Active:
            return kDeviceCudaActiveBase;
        case DevicePool::Reserved:
            return kDeviceCudaReservedBase;
        case DevicePool::Graphs:
            return kDeviceCudaGraphsBase;
        case DevicePool::GraphsActive:
            return kDeviceCudaGraphsActiveBase;
        case DevicePool::Device:
            break;
    }
    return kDeviceCudaBase;
}

// How many devices a pool has codes for.
inline uint8_t poolDevices(DevicePool pool) {
    return pool == DevicePool::Graphs || pool == DevicePool::GraphsActive ? kMaxGraphPoolDevices
                                                                          : kMaxCudaDevices;
}

inline DevicePool devicePool(uint8_t device) {
    for (DevicePool pool :
         {DevicePool::Active, DevicePool::Reserved, DevicePool::Graphs, DevicePool::GraphsActive})
        if (device >= poolBase(pool) && device < poolBase(pool) + poolDevices(pool)) return pool;
    return DevicePool::Device;
}

// The CUDA ordinal of a cuda code (any pool), or -1 for cpu and pinned.
inline int cudaOrdinal(uint8_t device) {
    const DevicePool pool = devicePool(device);
    const uint8_t base = poolBase(pool);
    return device >= base && device < base + poolDevices(pool) ? device - base : -1;
}

// The code of cuda:ordinal in a pool; ordinals past kMaxCudaDevices are not representable.
inline uint8_t cudaDevice(int ordinal, DevicePool pool = DevicePool::Device) {
    return static_cast<uint8_t>(poolBase(pool) + ordinal);
}

// The device-level code for an ordinal a hook or callback reported: one that is
// unknown (-1) or past kMaxCudaDevices counts on cuda:0 rather than vanishing.
inline uint8_t cudaDeviceOrFirst(int ordinal) {
    return cudaDevice(ordinal >= 0 && ordinal < kMaxCudaDevices ? ordinal : 0);
}

// Ascend NPUs: npu:N is kDeviceNpuBase + N, device memory from the ACL runtime
// (aclrtMalloc & co., as torch_npu's caching allocator calls them). No pools: no
// bridge reports torch_npu's blocks.
inline constexpr uint8_t kMaxNpuDevices = 16;
inline constexpr uint8_t kDeviceNpuBase = 208;

// The NPU ordinal of an npu code, or -1.
inline int npuOrdinal(uint8_t device) {
    return device >= kDeviceNpuBase && device < kDeviceNpuBase + kMaxNpuDevices
               ? device - kDeviceNpuBase
               : -1;
}

// The code of npu:ordinal; an ordinal that is unknown (-1) or past kMaxNpuDevices
// counts on npu:0 rather than vanishing.
inline uint8_t npuDeviceOrFirst(int ordinal) {
    return static_cast<uint8_t>(kDeviceNpuBase +
                                (ordinal >= 0 && ordinal < kMaxNpuDevices ? ordinal : 0));
}

// Keys of Alloc/Free records that are not plain addresses. Addresses are unique
// across devices (CUDA's unified addressing) and user-space addresses stay below
// 2^47, so the top bits are free to keep other kinds of object apart in one
// table of live keys:
//   bit 63  a CUDA VMM physical allocation, keyed by its handle (cuMemCreate)
//   bit 62  a block of PyTorch's caching allocator, in the cuda:N.active pool
//   bit 61  a segment (or 2 MiB page of one) in the cuda:N.reserved pool
//   bit 60  the same block (with bit 62) or segment (with bit 61) again, in
//           cuda:N.graphs_active or cuda:N.graphs; bits 47-59 then number the
//           private pool it belongs to (1 and up, as a cuda.graph_pool note
//           names it)
inline constexpr uint64_t kKeyVmmHandle = 1ull << 63;
inline constexpr uint64_t kKeyActivePool = 1ull << 62;
inline constexpr uint64_t kKeyReservedPool = 1ull << 61;
inline constexpr uint64_t kKeyGraphPool = 1ull << 60;
inline constexpr unsigned kKeyGraphPoolShift = 47;
inline constexpr uint32_t kMaxGraphPools = (1u << 13) - 1;

// The private pool number a key of cuda:N.graphs or cuda:N.graphs_active carries
// (0 for any other key).
inline uint32_t graphPoolOfKey(uint64_t key) {
    if (!(key & kKeyGraphPool)) return 0;
    return static_cast<uint32_t>(key >> kKeyGraphPoolShift) & kMaxGraphPools;
}

// How a process's stream ended (End record). A stream that stops without End was
// cut: the process was killed, or its collector lost the socket.
enum class ExitKind : uint8_t {
    Normal = 0,     // exit() or a return from main: the collector's destructor ran
    Immediate = 1,  // _exit() (os._exit, a fork child's exit): destructors skipped
    Exec = 2,       // the process image is being replaced (execve): its memory goes with it
    Detach = 3,     // memtool.track()'s block ended: the process runs on, no longer recorded
};

// ---- varint (unsigned LEB128) ------------------------------------------------
//
//   value 300 = 0b1_0010_1100  ->  bytes 0xAC 0x02
//             low 7 bits first, high bit of a byte set while more bytes follow.
inline constexpr size_t kMaxVarintBytes = 10;

inline uint8_t* putVarint(uint8_t* p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = static_cast<uint8_t>(v) | 0x80;
        v >>= 7;
    }
    *p++ = static_cast<uint8_t>(v);
    return p;
}

inline size_t varintBytes(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        ++n;
    }
    return n;
}

// A string is its byte length as a varint, then the bytes (no terminator).
inline uint8_t* putString(uint8_t* p, const char* s, size_t len) {
    p = putVarint(p, len);
    std::memcpy(p, s, len);
    return p + len;
}

inline size_t stringBytes(size_t len) { return varintBytes(len) + len; }

// ---- fixed-size records ----------------------------------------------------------
// Largest fixed record: tag + 9 varints.
inline constexpr size_t kMaxFixedRecordBytes = 1 + 9 * kMaxVarintBytes;

// Node ids are implicit: the n-th NativeNode record of a stream defines native node n
// (starting at 1); likewise PyCode and PyNode records. Id 0 is the root / "none".
inline uint8_t* encodeNativeNode(uint8_t* p, uint64_t parent, uint64_t ip) {
    *p++ = static_cast<uint8_t>(RecordTag::NativeNode);
    p = putVarint(p, parent);
    return putVarint(p, ip);
}

inline uint8_t* encodePyNode(uint8_t* p, uint64_t parent, uint64_t codeId, uint64_t line) {
    *p++ = static_cast<uint8_t>(RecordTag::PyNode);
    p = putVarint(p, parent);
    p = putVarint(p, codeId);
    return putVarint(p, line);
}

// No thread id rides on events: no report groups by thread (a thread's Python
// frames already name its entry point), and every record pays for what it carries.
struct AllocFields {
    uint8_t device = kDeviceCpu;
    uint64_t address = 0;     // or a key (kKey* bits)
    uint64_t size = 0;        // bytes
    uint64_t nativeNode = 0;  // 0: no native stack
    uint64_t pyNode = 0;      // 0: no Python stack
    uint64_t timeDeltaNs =
        0;                // since the previous timed record (Alloc, Free, Control) of the stream
    uint64_t region = 0;  // the pausable region it was served from (a Region record's id); 0: none
};

inline uint8_t* encodeAlloc(uint8_t* p, const AllocFields& a) {
    *p++ = static_cast<uint8_t>(RecordTag::Alloc);
    *p++ = a.device;
    p = putVarint(p, a.address);
    p = putVarint(p, a.size);
    p = putVarint(p, a.nativeNode);
    p = putVarint(p, a.pyNode);
    p = putVarint(p, a.timeDeltaNs);
    return putVarint(p, a.region);
}

struct FreeFields {
    uint8_t device = kDeviceCpu;
    uint64_t address = 0;
    uint64_t timeDeltaNs = 0;
};

inline uint8_t* encodeFree(uint8_t* p, const FreeFields& f) {
    *p++ = static_cast<uint8_t>(RecordTag::Free);
    *p++ = f.device;
    p = putVarint(p, f.address);
    return putVarint(p, f.timeDeltaNs);
}

// ShortLived: a block freed before the stream recorded anything else, in place
// of its Alloc and Free (a temporary: an op's workspace, a loop's tensor). The
// Alloc's fields but the region (always 0: a region's blocks are never sent so),
// then the Free's time delta, since the Alloc. Readers take it as the two records.
inline uint8_t* encodeShortLived(uint8_t* p, const AllocFields& a, uint64_t freeDeltaNs) {
    *p++ = static_cast<uint8_t>(RecordTag::ShortLived);
    *p++ = a.device;
    p = putVarint(p, a.address);
    p = putVarint(p, a.size);
    p = putVarint(p, a.nativeNode);
    p = putVarint(p, a.pyNode);
    p = putVarint(p, a.timeDeltaNs);
    return putVarint(p, freeDeltaNs);
}

// Oom: an allocation the program asked for and did not get (the CPU allocator's
// posix_memalign failed; cudaMalloc returned out-of-memory; PyTorch's caching
// allocator raised its out-of-memory error). The stack is the failed request's;
// the reader keeps what was live at that moment.
enum class OomSource : uint8_t {
    Allocator = 1,  // the allocation call itself failed (the program sees the error)
    Torch = 2,      // PyTorch's caching allocator gave up (after freeing its cache)
};
struct OomFields {
    uint8_t device = kDeviceCpu;
    uint64_t size = 0;  // bytes requested
    uint64_t nativeNode = 0;
    uint64_t pyNode = 0;
    uint64_t timeDeltaNs = 0;  // on the same clock as Alloc/Free
    OomSource source = OomSource::Allocator;
    uint64_t deviceFree = 0;   // the device's free bytes then, where known (0: unknown)
    uint64_t deviceTotal = 0;  // its total bytes (0: unknown)
};

inline uint8_t* encodeOom(uint8_t* p, const OomFields& o) {
    *p++ = static_cast<uint8_t>(RecordTag::Oom);
    *p++ = o.device;
    p = putVarint(p, o.size);
    p = putVarint(p, o.nativeNode);
    p = putVarint(p, o.pyNode);
    p = putVarint(p, o.timeDeltaNs);
    *p++ = static_cast<uint8_t>(o.source);
    p = putVarint(p, o.deviceFree);
    return putVarint(p, o.deviceTotal);
}

// The collector's own counters, sent last. The CLI compares them with what it
// received to prove that no event was lost on the way.
struct EndFields {
    uint64_t allocCount = 0;
    uint64_t freeCount = 0;
    uint64_t allocatedBytes = 0;
    uint64_t freedBytes = 0;
    uint64_t recordCount = 0;   // every record before End, the handshake included
    uint64_t missedEvents = 0;  // events the collector saw while connected but could not record
    uint64_t exitKind = 0;      // an ExitKind
    uint64_t exitStatus = 0;    // the status given to exit()/_exit(), plus one; 0: not known
};

inline uint8_t* encodeEnd(uint8_t* p, const EndFields& e) {
    *p++ = static_cast<uint8_t>(RecordTag::End);
    p = putVarint(p, e.allocCount);
    p = putVarint(p, e.freeCount);
    p = putVarint(p, e.allocatedBytes);
    p = putVarint(p, e.freedBytes);
    p = putVarint(p, e.recordCount);
    p = putVarint(p, e.missedEvents);
    p = putVarint(p, e.exitKind);
    return putVarint(p, e.exitStatus);
}

// ---- Window ------------------------------------------------------------------------
// A run of Alloc, Free and ShortLived records that the collector folded before
// sending (collectors/engine/WindowCompactor.h writes it; PROTOCOL.md has the layout): a
// reader that applies it holds exactly what the records would have left it with.
// Its timeline points are M4 samples (core/Timeline.h) in buckets of 2^shift ns,
// shift the least at or above kTimelineFirstShift that puts the time in one of
// kTimelineMaxBuckets buckets: the reader's own buckets are never finer.
inline constexpr unsigned kTimelineFirstShift = 10;
inline constexpr uint64_t kTimelineMaxBuckets = 1024;
inline unsigned timelineShift(uint64_t timeNs) {
    const unsigned bits = timeNs == 0 ? 0 : 64 - static_cast<unsigned>(__builtin_clzll(timeNs));
    return bits > kTimelineFirstShift + 10 ? bits - 10 : kTimelineFirstShift;
}
static_assert(kTimelineMaxBuckets == 1024, "timelineShift() counts 10 bits of buckets");
// Old frees' flags: freed before the last new peak of its device in the window.
inline constexpr uint8_t kWindowFreeBeforePeak = 1;

// ---- string-carrying records -----------------------------------------------------
// The caller sizes the buffer with the matching *Bytes() function.

// Preamble, once at the start of a stream: the 8 magic bytes, then the protocol
// version as a 4-byte little-endian integer. A reader checks both before anything else.
inline constexpr size_t kPreambleBytes = 12;
inline uint8_t* encodePreamble(uint8_t* p) {
    std::memcpy(p, kMagic, 8);
    for (int i = 0; i < 4; ++i) p[8 + i] = static_cast<uint8_t>(kProtocolVersion >> (8 * i));
    return p + kPreambleBytes;
}

// Handshake: the first record, right after the preamble. The caller writes the
// head, then `argc` strings (putString), then the launcher's variables
// (encodeHandshakeEnv), then, with kHandshakeContinues, the continuation
// (encodeHandshakeContinuation), into a buffer of handshakeBytes(...).
inline constexpr uint64_t kHandshakeNativeStacks = 1;  // flags bit 0
inline constexpr uint64_t kHandshakePythonStacks = 2;  // flags bit 1
// Bit 2: the stream continues the stack ids (native and Python nodes, code
// objects, modules) of an earlier stream, named by its pid and start time: a
// fork child's parent's, or this process's own before an exec that failed. The
// reader starts from that stream's first `counts` of each.
inline constexpr uint64_t kHandshakeContinues = 4;
// Bit 3: a fork child (no exec): the memory it inherited is its parent's.
inline constexpr uint64_t kHandshakeForked = 8;
// Bit 4: not a stream of its own: a notice about the stream of this pid that
// started at `start time`, which its collector had to stop (a Note follows, key
// kNoteStreamLost, saying why); nothing else comes.
inline constexpr uint64_t kHandshakeNotice = 16;
inline constexpr uint64_t kHandshakeKnownFlags = 31;

// The launcher's environment variables a process's rank is read from (torchrun,
// Slurm, Open MPI, MPICH), as far as they are set: name and value, in this order.
inline constexpr const char* kRankVariables[] = {
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "SLURM_NTASKS",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "PMI_RANK",
    "PMI_SIZE",
};
inline constexpr size_t kRankVariableCount = sizeof kRankVariables / sizeof kRankVariables[0];

// What a continuing stream takes over from the stream it continues.
struct StreamContinuation {
    uint64_t pid = 0;          // of the stream continued
    uint64_t startUnixNs = 0;  // its handshake's start time
    uint64_t nativeNodes = 0;  // its first N native nodes, code objects, ... are this stream's too
    uint64_t pyCodes = 0;
    uint64_t pyNodes = 0;
    uint64_t modules = 0;
};

inline size_t handshakeBytes(size_t argc, size_t argBytes, size_t envc = 0, size_t envBytes = 0) {
    return kPreambleBytes + 1 + 5 * kMaxVarintBytes + argc * kMaxVarintBytes + argBytes +
           kMaxVarintBytes + 2 * envc * kMaxVarintBytes + envBytes + 6 * kMaxVarintBytes;
}
inline uint8_t* encodeHandshakeHead(uint8_t* p, uint64_t pid, uint64_t ppid, uint64_t startUnixNs,
                                    uint64_t flags, uint64_t argc) {
    p = encodePreamble(p);
    *p++ = static_cast<uint8_t>(RecordTag::Handshake);
    p = putVarint(p, pid);
    p = putVarint(p, ppid);
    p = putVarint(p, startUnixNs);
    p = putVarint(p, flags);
    return putVarint(p, argc);
}
// After the arguments: envc, then envc pairs of strings (name, value).
inline uint8_t* encodeHandshakeEnvCount(uint8_t* p, uint64_t envc) { return putVarint(p, envc); }
inline uint8_t* encodeHandshakeContinuation(uint8_t* p, const StreamContinuation& c) {
    p = putVarint(p, c.pid);
    p = putVarint(p, c.startUnixNs);
    p = putVarint(p, c.nativeNodes);
    p = putVarint(p, c.pyCodes);
    p = putVarint(p, c.pyNodes);
    return putVarint(p, c.modules);
}

inline size_t pyCodeBytes(size_t fileLen, size_t nameLen) {
    return 1 + stringBytes(fileLen) + stringBytes(nameLen) + kMaxVarintBytes;
}
inline uint8_t* encodePyCode(uint8_t* p, const char* file, size_t fileLen, const char* name,
                             size_t nameLen, uint64_t firstLine) {
    *p++ = static_cast<uint8_t>(RecordTag::PyCode);
    p = putString(p, file, fileLen);
    p = putString(p, name, nameLen);
    return putVarint(p, firstLine);
}

// Note: a fact about the process that is not an event, as a key and a text.
//   "warning"      something the trace's reader should know (shown in the report)
//   "cuda.source"  what records CUDA memory: "cupti" or "runtime-hooks"
//   "torch.bridge" "attached" once the caching-allocator bridge sees every block
//   "program.end"  the program's own code finished: "python" (interpreter
//                  finalization began) or "exit" (main returned, exit was called);
//                  what is live at this point in the stream is what it leaked
inline constexpr const char* kNoteWarning = "warning";
inline constexpr const char* kNoteProgramEnd = "program.end";
inline constexpr const char* kProgramEndPython = "python";
inline constexpr const char* kProgramEndExit = "exit";
// Right before a "python" program.end: the storage addresses of the tensors the
// program's globals still reach, in hex, each optionally followed by "@NAME" (the
// global it was reached from: no spaces, at most kMaxReachableName bytes),
// space-separated, over any number of notes; then one program.reachable.end with
// their count in decimal (a list whose count differs is not used).
inline constexpr const char* kNoteReachable = "program.reachable";
inline constexpr const char* kNoteReachableEnd = "program.reachable.end";
inline constexpr size_t kMaxReachableName = 200;
// memtool run --modules: a PyCode record with this file stands for an nn.Module
// instance (its qualified name: "layer1.0.conv1 (Conv2d)"), not for code; a PyNode
// of it has line kModuleScopeForward or kModuleScopeBackward (core/Frame.h).
inline constexpr char kModuleScopeFile[] = "<memtool:module>";
inline constexpr uint64_t kModuleScopeForward = 1, kModuleScopeBackward = 2;
inline constexpr const char* kNoteCudaSource = "cuda.source";
inline constexpr const char* kNoteTorchBridge = "torch.bridge";
// "NUMBER DEVICE FIRST SECOND" (decimal): private pool NUMBER of the graph-pool
// keys (kKeyGraphPool) is PyTorch's pool (FIRST, SECOND) on cuda:DEVICE.
inline constexpr const char* kNoteGraphPool = "cuda.graph_pool";
//   "child.ended"  a child this process waited for ended: "PID STATUS", decimal,
//                  STATUS as wait() gives it (how a fork child that died of a
//                  signal, its stream cut short, ended: only its parent reaps it)
inline constexpr const char* kNoteChildEnded = "child.ended";
//   "stream.lost"  (in a notice) why the collector stopped writing the stream
inline constexpr const char* kNoteStreamLost = "stream.lost";
//   "collector.lock" before an End record: "CONTENDED WAITS", decimal: how many of
//                  the events' turns at the collector's lock found another
//                  thread holding it, and how many times a thread slept on it
inline constexpr const char* kNoteCollectorLock = "collector.lock";
//   "track.earlier_frees" before a Detach End (memtool.track): how many frees, decimal,
//                  were of blocks the stream never saw allocated (allocated before
//                  the block began); they are not counted anywhere else
inline constexpr const char* kNoteEarlierFrees = "track.earlier_frees";
inline size_t noteBytes(size_t keyLen, size_t textLen) {
    return 1 + stringBytes(keyLen) + stringBytes(textLen);
}
inline uint8_t* encodeNote(uint8_t* p, const char* key, size_t keyLen, const char* text,
                           size_t textLen) {
    *p++ = static_cast<uint8_t>(RecordTag::Note);
    p = putString(p, key, keyLen);
    return putString(p, text, textLen);
}

// ---- memory control (pausable regions) -------------------------------------------

// What a region's content goes to when it is paused.
enum class BackupKind : uint8_t {
    None = 0,  // discarded: undefined after resume
    Host = 1,  // pinned host memory (CUDA regions)
    Disk = 2,  // a file
};
// "none", "host", "disk": a backup as the trace, the ctl answers and the
// collector's messages name it. Inline and allocation-free, for the collectors.
inline const char* backupName(BackupKind k) {
    switch (k) {
        case BackupKind::Host:
            return "host";
        case BackupKind::Disk:
            return "disk";
        default:
            return "none";
    }
}

// Region: a pausable region of one tag on one device, declared before the first
// allocation served from it. Ids are explicit, from 1.
inline constexpr size_t kMaxTagBytes = 63;
inline size_t regionBytes(size_t tagLen) { return 1 + kMaxVarintBytes + stringBytes(tagLen) + 2; }
inline uint8_t* encodeRegion(uint8_t* p, uint64_t id, const char* tag, size_t tagLen,
                             uint8_t device, BackupKind backup) {
    *p++ = static_cast<uint8_t>(RecordTag::Region);
    p = putVarint(p, id);
    p = putString(p, tag, tagLen);
    *p++ = device;
    *p++ = static_cast<uint8_t>(backup);
    return p;
}

enum class ControlAction : uint8_t {
    Pause = 1,    // physical memory released, addresses kept
    Resume = 2,   // physical memory back at the same addresses
    Yield = 3,    // a pause as part of yielding the whole program's memory (courtesy)
    Restore = 4,  // a resume as part of taking it back
};
// "pause", "resume", "yield", "restore": an action as the trace names it (the
// same words as the ctl commands). Inline and allocation-free, for the collectors.
inline const char* actionName(ControlAction a) {
    switch (a) {
        case ControlAction::Pause:
            return "pause";
        case ControlAction::Resume:
            return "resume";
        case ControlAction::Yield:
            return "yield";
        case ControlAction::Restore:
            return "restore";
    }
    return "pause";
}

enum class ControlOrigin : uint8_t {
    Api = 1,     // the program itself (import memtool, the collector's C API)
    Ctl = 2,     // `memtool ctl` from outside
    Policy = 3,  // a rule of memtool run's memory policy (cli/policy)
};

// Control: one region paused or resumed (or an attempt that failed: ok = 0, and
// nothing changed). `bytes` is the physical memory released or restored (sizes
// rounded up to the device's granularity); readers account the region's blocks
// by their own recorded sizes.
struct ControlFields {
    uint64_t timeDeltaNs = 0;  // on the same clock as Alloc/Free
    uint64_t region = 0;
    ControlAction action = ControlAction::Pause;
    ControlOrigin origin = ControlOrigin::Api;
    uint64_t bytes = 0;
    BackupKind backup = BackupKind::None;
    uint64_t durationNs = 0;
    bool ok = true;
};
inline size_t controlBytes(size_t messageLen) {
    return 1 + 8 * kMaxVarintBytes + stringBytes(messageLen);
}
inline uint8_t* encodeControl(uint8_t* p, const ControlFields& c, const char* message,
                              size_t messageLen) {
    *p++ = static_cast<uint8_t>(RecordTag::Control);
    p = putVarint(p, c.timeDeltaNs);
    p = putVarint(p, c.region);
    *p++ = static_cast<uint8_t>(c.action);
    *p++ = static_cast<uint8_t>(c.origin);
    p = putVarint(p, c.bytes);
    *p++ = static_cast<uint8_t>(c.backup);
    p = putVarint(p, c.durationNs);
    *p++ = c.ok ? 1 : 0;
    return putString(p, message, messageLen);
}

// Request (down-stream) and Reply (up-stream): a command for the process, as
// argv-like strings ("status", "pause weights kv", ...), and its answer: a status
// and a JSON body the CLI passes on or renders.
enum class ReplyStatus : uint8_t {
    Ok = 0,
    Failed = 1,   // the command ran and did not succeed; the body says why
    Unknown = 2,  // no such command
    Refused = 3,  // not possible in this process (the body says why)
};
inline size_t requestBytes(size_t argc, size_t argBytes) {
    return 1 + 2 * kMaxVarintBytes + argc * kMaxVarintBytes + argBytes;
}
inline uint8_t* encodeRequestHead(uint8_t* p, uint64_t id, uint64_t argc) {
    *p++ = static_cast<uint8_t>(RecordTag::Request);
    p = putVarint(p, id);
    return putVarint(p, argc);
}
inline size_t replyBytes(size_t bodyLen) { return 1 + kMaxVarintBytes + 1 + stringBytes(bodyLen); }
inline uint8_t* encodeReply(uint8_t* p, uint64_t id, ReplyStatus status, const char* body,
                            size_t bodyLen) {
    *p++ = static_cast<uint8_t>(RecordTag::Reply);
    p = putVarint(p, id);
    *p++ = static_cast<uint8_t>(status);
    return putString(p, body, bodyLen);
}

// Module: one loaded ELF object. Ranges are its executable segments as
// [start, start + length) in the target's address space; loadBias is what
// dl_iterate_phdr calls dlpi_addr (address = bias + ELF virtual address).
inline size_t moduleBytes(size_t pathLen, size_t rangeCount) {
    return 1 + kMaxVarintBytes * 3 + stringBytes(pathLen) + rangeCount * 2 * kMaxVarintBytes;
}
inline uint8_t* encodeModuleHead(uint8_t* p, uint64_t moduleId, const char* path, size_t pathLen,
                                 uint64_t loadBias, uint64_t rangeCount) {
    *p++ = static_cast<uint8_t>(RecordTag::Module);
    p = putVarint(p, moduleId);
    p = putString(p, path, pathLen);
    p = putVarint(p, loadBias);
    return putVarint(p, rangeCount);
}
inline uint8_t* encodeModuleRange(uint8_t* p, uint64_t start, uint64_t length) {
    p = putVarint(p, start);
    return putVarint(p, length);
}

}  // namespace memtool::core
