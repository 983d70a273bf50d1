// The composition root: the collector's objects in static storage, wired to one
// another here and nowhere else. Each front end is handed what it needs at
// start-up (the module scan, the stream's lifecycle, the CUDA runtime hooks, the
// torch bridge loader, the pausable regions); what has no caller to hand it
// anything (the preload hooks, the C surface) reaches the engine and the regions
// through the accessors defined below.

#include "collectors/Collector.h"

#include <dlfcn.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "collectors/ascend/AclHooks.h"
#include "collectors/control/AclVmmBackend.h"
#include "collectors/control/Collection.h"
#include "collectors/control/ControlChannel.h"
#include "collectors/control/Courtesy.h"
#include "collectors/control/CpuPagesBackend.h"
#include "collectors/control/LiveTensors.h"
#include "collectors/control/OwnThread.h"
#include "collectors/control/Regions.h"
#include "collectors/control/SafePoint.h"
#include "collectors/control/TmsEnvironment.h"
#include "collectors/cuda/CudaRuntimeHooks.h"
#include "collectors/engine/NoDestroy.h"
#include "collectors/engine/SocketSink.h"
#include "collectors/engine/Warn.h"
#include "collectors/preload/AllocatorHooks.h"
#include "collectors/preload/ModuleScan.h"
#include "collectors/preload/StreamLifecycle.h"
#include "collectors/stacks/CPythonApi.h"
#include "collectors/torch/TorchBridgeLoader.h"
#if MEMTOOL_HAVE_CUDA_VMM
#include "collectors/control/CudaVmmBackend.h"
#endif

namespace memtool::collectors {

namespace {

// Plain data at namespace scope only (or objects built on first use): the library
// constructor runs before this file's dynamic initializers would.
// The module scan's lock; connecting happens under it, and fork() holds it.
pthread_mutex_t gScanMutex = PTHREAD_MUTEX_INITIALIZER;

constinit NoDestroy<Engine> gEngine;
constinit NoDestroy<SocketSink> gSink;
// memtool's variables, as this process started with them, for its children.
constinit NoDestroy<ChildEnvironment> gChildEnvironment;
constinit NoDestroy<control::Regions> gRegions;
constinit NoDestroy<control::CpuPagesBackend> gCpuPages;
constinit NoDestroy<control::AclVmmBackend> gAclVmm;
// Asked when a region first needs NPU memory: the Ascend runtime is the program's.
bool aclVmmReady(control::Failure& why) { return gAclVmm.value.load(why); }
#if MEMTOOL_HAVE_CUDA_VMM
constinit NoDestroy<control::CudaVmmBackend> gCudaVmm;
// Asked when a region first needs CUDA memory: the driver is already loaded in a
// program that uses CUDA, and is never loaded into one that does not.
bool cudaVmmReady(control::Failure& why) { return gCudaVmm.value.load(why); }
#endif
constinit NoDestroy<control::SafePoint> gSafePoint;
constinit NoDestroy<control::Courtesy> gCourtesy{gRegions.value, gSafePoint.value};
constinit NoDestroy<control::LiveTensors> gTensors{gSafePoint.value};
constinit NoDestroy<control::Collection> gCollection{gSafePoint.value};
constinit NoDestroy<control::RegionCommands> gCommands{gRegions.value, &gCourtesy.value,
                                                       &gTensors.value};
constinit NoDestroy<StreamLifecycle> gStream{gEngine.value, gSink.value, gRegions.value,
                                             gCommands.value, gScanMutex};
constinit NoDestroy<ModuleScan> gModules{gEngine.value, gStream.value, gScanMutex};

// The engine's reopener: a fork child's first event (or the first after an exec
// that failed) starts its stream, where the process tracks an allocator.
void reopenStream() {
    gEngine.value.wantReopen(false);
    gModules.value.refresh();
}

void sendLostNotice(const char* why) { gStream.value.sendLostNotice(why); }

void atForkPrepare() { gStream.value.prepareFork(); }
void atForkParent() { gStream.value.parentAfterFork(); }
void atForkChild() { gStream.value.childAfterFork(); }

}  // namespace

// The accessors for what no caller can hand anything to (Collector.h, and the
// control headers' regions(), safePoint(), courtesy()).
Engine& engine() { return gEngine.value; }
const ChildEnvironment& childEnvironment() { return gChildEnvironment.value; }

namespace control {
Regions& regions() { return gRegions.value; }
SafePoint& safePoint() { return gSafePoint.value; }
Courtesy& courtesy() { return gCourtesy.value; }
}  // namespace control

bool collectorConfigured() { return gStream.value.configured(); }

namespace {

// torch_memory_saver's start-up environment (control/TmsEnvironment.h): with
// TMS_INIT_ENABLE, CUDA memory outside explicit regions joins the "default"
// region, as under that library (--pausable all, which takes CPU memory too, wins
// over it); TMS_DISK_BACKUP_CHUNK_MB sizes the CUDA disk backups' chunks.
void applyTmsInit(control::Regions& r, bool pausableAll) {
    control::TmsInit init;
    char why[256];
    const auto lookup = +[](const char* name) -> const char* { return std::getenv(name); };
    if (!control::readTmsInit(lookup, &init, why, sizeof why)) {
        warn(why);
        return;
    }
    if (init.enable && !pausableAll) r.setPausableAll(init.backup, true);
#if MEMTOOL_HAVE_CUDA_VMM
    if (init.diskChunkBytes) gCudaVmm.value.setChunkBytes(init.diskChunkBytes);
#endif
}

// What startCollector and the first memtool.track share: the collector wired to
// the socket, the options and the backup directory a memtool run gave it.
// False when `socket` is no path the sink can use.
bool configureCollector(const char* socket, const char* options, const char* backupDir) {
    Engine& e = gEngine.value;
    if (!gStream.value.setSocketPath(socket)) return false;
    setLogLevel(std::getenv("MEMTOOL_LOG"));
    if (debugLogOn()) DebugLine().add("collector loaded, stream to ").add(socket);
    const char* why = nullptr;
    if (!e.configure(EngineOptions::parse(options), &why)) warn(why);
    uint64_t start = 0, end = 0;
    if (StackCapture::codeRangeOf(allocatorHookCode(), &start, &end))
        e.capture().setOwnCode(start, end);
    setCudaRuntimeRecording(e.options().cudaRuntimeHooks);
    control::Regions& r = gRegions.value;
    r.setEngine(&e);
    r.setCpuBackend(&gCpuPages.value);
#if MEMTOOL_HAVE_CUDA_VMM
    r.setCudaBackend(&gCudaVmm.value, cudaVmmReady);
    gCudaVmm.value.setHostPoolLimit(e.options().hostPoolBytes);
#endif
    r.setNpuBackend(&gAclVmm.value, aclVmmReady);
    r.setBackupDirectory(backupDir);
    r.setHostBudget(e.options().hostBudgetBytes);
    r.setVerifyAll(e.options().verify);
    if (e.options().pausableAll) r.setPausableAll();
    applyTmsInit(r, e.options().pausableAll);
    gCourtesy.value.setCacheEmptier(emptyTorchCache);
    gCourtesy.value.setWorkspaceReleaser(releaseTorchWorkspaces);
    gCollection.value.setCacheEmptier(emptyTorchCache);
    gCommands.value.setCollection(&gCollection.value);
    gCommands.value.setSafePoint(&gSafePoint.value);
    e.setReopener(reopenStream);
    gSink.value.onTakenOver(sendLostNotice);
    static bool forkHandlers = false;  // once per process image: they cannot be removed
    if (!forkHandlers) {
        forkHandlers = true;
        pthread_atfork(atForkPrepare, atForkParent, atForkChild);
    }
    configureTorchBridge();
    gStream.value.markConfigured();
    return true;
}

// The calling thread's message buffer, as the C surface hands it over.
void say(char* out, size_t size, const char* text) {
    if (!out || size == 0) return;
    const size_t n = std::min(size - 1, std::strlen(text));
    std::memcpy(out, text, n);
    out[n] = '\0';
}

std::atomic<bool> gTracking{false};
pthread_mutex_t gTrackMutex = PTHREAD_MUTEX_INITIALIZER;

// Memory regions still hold (resident or paused) on any device: their frees must
// still reach memtool, so the hooks stay.
bool regionsHoldMemory() {
    auto holds = [](uint8_t device) {
        uint64_t resident = 0, paused = 0;
        gRegions.value.totals(device, &resident, &paused);
        return resident != 0 || paused != 0;
    };
    if (holds(core::kDeviceCpu)) return true;
    for (uint8_t d = core::kDeviceCudaBase; d < core::kDeviceCudaActiveBase; ++d)
        if (holds(d)) return true;
    for (int n = 0; n < core::kMaxNpuDevices; ++n)
        if (holds(core::npuDeviceOrFirst(n))) return true;
    return false;
}

// No track runs: the hooks come out, unless regions still hold memory (a
// region's blocks freed later must still reach the regions: the hooks then stay,
// idle but for those), which `note` then says.
void unhookUnlessRegionsHold(char* note, size_t noteBytes) {
    if (regionsHoldMemory()) {
        say(note, noteBytes,
            "memory regions still hold memory: memtool's hooks stay in place (doing nothing "
            "but serving those regions' frees) until the process ends");
        return;
    }
    gModules.value.detach();
    say(note, noteBytes, "");
}

}  // namespace

bool startCollector() {
    // Wired whether or not this process records: the C surface may be called anyway.
    bindCudaRuntimeHooks(gEngine.value, gRegions.value);
    bindAclHooks(gEngine.value, gRegions.value);
    bindTorchBridge(gEngine.value);
    const char* socket = std::getenv(core::kEnvSocket);
    if (!socket || !*socket) return false;
    Dl_info self;
    if (dladdr(reinterpret_cast<const void*>(&startCollector), &self) && self.dli_fname)
        gChildEnvironment.value.capture(environ, self.dli_fname);
    return configureCollector(socket, std::getenv(core::kEnvOptions),
                              std::getenv(core::kEnvBackupDir));
}

namespace {

// What memtool.track and memtool attach share, gTrackMutex held: the collector
// wired to the companion's socket and what is loaded now scanned (Python tracking
// left to a later scan where `deferPython`). One of the kAttach codes; with
// kAttachStarted the track runs (gTracking).
int beginTrack(const char* socket, const char* options, const char* backupDir, bool deferPython) {
    if (gTracking.load()) return kAttachBusy;
    if (gStream.value.configured()) return kAttachUnderRun;
    if (!socket || !*socket) return kAttachBadSocket;
    control::setControlThreadJoinable(true);
    if (!configureCollector(socket, options, backupDir)) return kAttachBadSocket;
    if (deferPython) gModules.value.deferPython(true);
    gModules.value.refresh();
    if (!gEngine.value.active()) {
        gStream.value.detach();
        gModules.value.detach();
        gModules.value.deferPython(false);
        return kAttachNothingTracked;
    }
    gTracking.store(true);
    return kAttachStarted;
}

}  // namespace

bool startTracking(const char* socket, const char* options, const char* backupDir, char* why,
                   size_t whyBytes) {
    pthread_mutex_lock(&gTrackMutex);
    const int code = beginTrack(socket, options, backupDir, false);
    pthread_mutex_unlock(&gTrackMutex);
    const char* text =
        code == kAttachBusy
            ? "memtool.track: a track is already running in this process (one at a time)"
        : code == kAttachUnderRun ? "memtool.track: this process runs under `memtool run`, which "
                                    "records all of it already"
        : code == kAttachBadSocket
            ? (!socket || !*socket ? "memtool.track: no socket to the companion memtool"
                                   : "memtool.track: the companion's socket path is too long")
        : code == kAttachNothingTracked
            ? "memtool.track: no allocator memtool tracks is loaded in this process (libc10 of "
              "torch, or CUDA): import torch first"
            : "";
    if (code != kAttachStarted) say(why, whyBytes, text);
    return code == kAttachStarted;
}

namespace {

// memtool attach's track (startAttach): ended by the control thread's "detach".
std::atomic<bool> gAttached{false};
std::atomic<bool> gDetachAsked{false};
CPythonApi gAttachPython;

// The pending call startAttach asked for: on the main thread, between two
// bytecodes, the GIL held, where installing Python tracking is safe.
int pythonAtAttach(void*) {
    gModules.value.deferPython(false);
    if (gTracking.load()) gModules.value.refresh();
    return 0;
}

// The track's end, on a thread of its own: ending it joins the control thread,
// which asked for it.
void* detachAttached(void*) {
    if (regionsHoldMemory())
        gEngine.value.note(core::kNoteWarning,
                           "memory regions still hold memory: memtool's hooks stay in the "
                           "program after the detach (doing nothing but serving those regions' "
                           "frees)");
    char note[256];
    stopTracking(false, note, sizeof note);
    gAttached.store(false);
    return nullptr;
}

// The control thread's "detach" (control::RegionCommands), and the stream's end
// while attached (memtool attach died: the program is let go of all the same).
bool requestDetach(const char** why) {
    if (!gAttached.load()) {
        *why = "this process was not attached by memtool attach: its track ends where it began";
        return false;
    }
    if (gDetachAsked.exchange(true)) return true;  // under way
    if (!control::startOwnThread(detachAttached, nullptr, nullptr)) {
        *why = "no thread could be made to end the track";
        return false;
    }
    return true;
}

}  // namespace

int startAttach(const char* socket, const char* options, const char* backupDir,
                const char* pythonPackage) {
    // The detach of a memtool attach that went away a moment ago (its stream's end)
    // may still run on its own thread: it is given 2 s to finish.
    for (int waited = 0; waited < 2000 && gAttached.load() && gDetachAsked.load(); ++waited) {
        timespec ms{0, 1'000'000};
        nanosleep(&ms, nullptr);
    }
    // The thread memtool stopped may hold this lock (inside memtool.track's start):
    // it is not waited for.
    if (pthread_mutex_trylock(&gTrackMutex) != 0) return kAttachBusy;
    const int code = beginTrack(socket, options, backupDir, true);
    if (code == kAttachStarted) {
        gCommands.value.setDetacher(requestDetach);
        if (pythonPackage && *pythonPackage)
            control::LiveTensors::setPackageDirectory(pythonPackage);
        gDetachAsked.store(false);
        gAttached.store(true);
    }
    pthread_mutex_unlock(&gTrackMutex);
    if (code != kAttachStarted) return code;
    // Python tracking from the main thread's next bytecode boundary: this thread
    // is the main one (memtool attach stops the process's first thread), which
    // 3.11 and 3.12 need for the interpreter to see the call.
    if (gAttachPython.resolvePendingCalls() && gAttachPython.IsInitialized())
        gAttachPython.AddPendingCall(pythonAtAttach, nullptr);
    else
        gModules.value.deferPython(false);
    return kAttachStarted;
}

bool stopTracking(bool keepHooks, char* note, size_t noteBytes) {
    pthread_mutex_lock(&gTrackMutex);
    if (!gTracking.load()) {
        say(note, noteBytes, "memtool.track: no track is running");
        pthread_mutex_unlock(&gTrackMutex);
        return false;
    }
    gStream.value.detach();
    gTracking.store(false);
    if (keepHooks)
        say(note, noteBytes, "");
    else
        unhookUnlessRegionsHold(note, noteBytes);
    pthread_mutex_unlock(&gTrackMutex);
    return true;
}

bool unhook(char* note, size_t noteBytes) {
    pthread_mutex_lock(&gTrackMutex);
    const bool idle = !gTracking.load() && !gStream.value.configured();
    if (!idle)
        say(note, noteBytes, "memtool.track: the hooks stay while a track or memtool run records");
    else
        unhookUnlessRegionsHold(note, noteBytes);
    pthread_mutex_unlock(&gTrackMutex);
    return idle;
}

void refreshModules() { gModules.value.refresh(); }
bool attachCuda() { return gModules.value.attachCuda(); }
void fallBackToCudaRuntimeHooks(const char* why) { gModules.value.fallBackToRuntimeHooks(why); }

void finishCollector(core::ExitKind kind, int exitStatus) {
    gStream.value.finish(kind, exitStatus);
}
void childReaped(pid_t pid, int status) { gStream.value.childReaped(pid, status); }
void beforeExec() { gStream.value.beforeExec(); }
void afterFailedExec() { gStream.value.afterFailedExec(); }

}  // namespace memtool::collectors
