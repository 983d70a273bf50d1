// The composition root: the collector's objects in static storage, wired to one
// another here and nowhere else. Each front end is handed what it needs at
// start-up (the module scan, the stream's lifecycle, the CUDA runtime hooks, the
// torch bridge loader, the pausable regions); what has no caller to hand it
// anything (the preload hooks, the C surface) reaches the engine and the regions
// through the accessors defined below.

#include "collectors/Collector.h"

#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include <cstdlib>

#include "collectors/control/ControlChannel.h"
#include "collectors/control/Courtesy.h"
#include "collectors/control/CpuPagesBackend.h"
#include "collectors/control/LiveTensors.h"
#include "collectors/control/Regions.h"
#include "collectors/control/SafePoint.h"
#include "collectors/cuda/CudaRuntimeHooks.h"
#include "collectors/engine/NoDestroy.h"
#include "collectors/engine/SocketSink.h"
#include "collectors/engine/Warn.h"
#include "collectors/preload/AllocatorHooks.h"
#include "collectors/preload/ModuleScan.h"
#include "collectors/preload/StreamLifecycle.h"
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
#if MEMTOOL_HAVE_CUDA_VMM
constinit NoDestroy<control::CudaVmmBackend> gCudaVmm;
// Asked when a region first needs CUDA memory: the driver is already loaded in a
// program that uses CUDA, and is never loaded into one that does not.
bool cudaVmmReady(control::Failure& why) { return gCudaVmm.value.load(why); }
#endif
constinit NoDestroy<control::SafePoint> gSafePoint;
constinit NoDestroy<control::Courtesy> gCourtesy{gRegions.value, gSafePoint.value};
constinit NoDestroy<control::LiveTensors> gTensors{gSafePoint.value};
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

bool startCollector() {
    Engine& e = gEngine.value;
    // Wired whether or not this process records: the C surface may be called anyway.
    bindCudaRuntimeHooks(e, gRegions.value);
    bindTorchBridge(e);
    const char* socket = std::getenv(core::kEnvSocket);
    if (!gStream.value.setSocketPath(socket)) return false;
    setLogLevel(std::getenv("MEMTOOL_LOG"));
    if (debugLogOn()) DebugLine().add("collector loaded, stream to ").add(socket);
    Dl_info self;
    if (dladdr(reinterpret_cast<const void*>(&startCollector), &self) && self.dli_fname)
        gChildEnvironment.value.capture(environ, self.dli_fname);
    const char* why = nullptr;
    if (!e.configure(EngineOptions::parse(std::getenv(core::kEnvOptions)), &why)) warn(why);
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
    r.setBackupDirectory(std::getenv(core::kEnvBackupDir));
    if (e.options().pausableAll) r.setPausableAll();
    gCourtesy.value.setCacheEmptier(emptyTorchCache);
    e.setReopener(reopenStream);
    gSink.value.onTakenOver(sendLostNotice);
    pthread_atfork(atForkPrepare, atForkParent, atForkChild);
    configureTorchBridge();
    gStream.value.markConfigured();
    return true;
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
