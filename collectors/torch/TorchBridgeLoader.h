#pragma once
// Loads the torch bridge (collectors/torch) into a process that runs the torch
// build it was made for, and attaches it to PyTorch's CUDA caching allocator.
// Called before each CUDA device allocation until it is settled; cheap after.

namespace memtool::collectors {

class Engine;

// Hands the loader the engine the bridge records into (startCollector, before the
// C surface can ask for the bridge).
void bindTorchBridge(Engine& engine);

// Reads the bridge's path from the environment (library constructor).
void configureTorchBridge();

// Settles at most once per process: attached, or a warning note that says why the
// trace has no active/reserved figures. Never blocks: a thread that finds another
// one at work returns at once.
void tryAttachTorchBridge();

// Asks PyTorch's CUDA caching allocator to give back the memory it holds unused
// (emptyCache, through the bridge: no GIL needed). A no-op until the bridge is
// attached, or with a bridge that cannot.
void emptyTorchCache();
// Before a yield: cuBLAS's workspaces go back to the caching allocator (the
// bridge's memtool_torch_bridge_release_workspaces); 1 when they did, 0 when the
// bridge is not attached or cannot.
int releaseTorchWorkspaces();

}  // namespace memtool::collectors
