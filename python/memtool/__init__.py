"""memtool from inside the program: pausable memory regions.

Under `memtool run`, allocations made inside ``with memtool.region(tag):`` come
from memory that ``memtool.pause(tag)`` releases while the tensors keep their
addresses, and ``memtool.resume(tag)`` gives back (with the content when the
region has a backup). ``memtool ctl PID pause TAG`` does the same from outside.

Outside `memtool run` the module imports and does nothing: ``memtool.enabled``
is False, regions are plain blocks, and pause/resume warn once and return an
empty result.
"""
import contextlib
import os
import sys
import threading
import warnings
from dataclasses import dataclass

from . import _adopt, _collector, _counters, _live, _policy, _run
from ._counters import Bytes, Site
from ._track import Tracker, start, stop, track

__all__ = ["track", "start", "stop", "Tracker",
           "enabled", "region", "outside_regions", "pause", "resume", "regions", "yield_memory", "restore",
           "report_tensors", "snapshot", "hook_mode", "set_hook_mode", "set_backup_dir", "set_host_pool",
           "set_host_budget", "set_memory_margin", "read_backup", "Result", "Region",
           "allocated", "freed", "current", "peak", "top_sites", "Bytes", "Site",
           "set_policy", "policy", "adopt", "offload", "VerifyError"]

_BACKUPS = {"none": 0, "host": 1, "disk": 2}
_DEVICE_ONLY = 0x100  # MEMTOOL_REGION_DEVICE_ONLY (collectors/CollectorApi.h)
_VERIFY = 0x200  # MEMTOOL_REGION_VERIFY
_collector_handle = _collector.find()
enabled = _collector_handle is not None
_warned = False
_warn_lock = threading.Lock()

# How CUDA memory of a region reaches memtool (as torch_memory_saver's modes):
#   "preload": the collector's hooks serve cudaMalloc/cudaFree of PyTorch's caching
#              allocator; a MemPool per region keeps region segments for region
#              tensors only.
#   "torch":   a MemPool per region over a pluggable allocator whose functions are
#              the collector's (memtool_cuda_malloc/free; memtool_npu_malloc/free
#              for torch_npu's NPUPluggableAllocator).
# Ascend NPUs (torch_npu) work the same way: the hooks serve aclrtMallocAlign32 and
# aclrtFree of torch_npu's caching allocator, with a torch.npu.MemPool per region.
hook_mode = "preload"
_pools = {}


def set_hook_mode(mode):
    """'preload' (default) or 'torch'; before the first CUDA region."""
    global hook_mode
    if mode not in ("preload", "torch"):
        raise ValueError(f"hook_mode is 'preload' or 'torch', not {mode!r}")
    if _pools and mode != hook_mode:
        raise RuntimeError("memtool: the hook mode cannot change once a CUDA region exists")
    hook_mode = mode


def _npu_pool(tag, backup, device):
    """torch_npu's pool for this region, or None when no NPU is in use.

    As _cuda_pool: used when torch_npu is imported and initialized, or when the
    region asks for it (device="npu"). A program that calls the Ascend runtime
    itself (no torch_npu) needs no pool: its aclrtMalloc calls are served directly.
    """
    if device not in (None, "npu"):
        return None
    torch = sys.modules.get("torch")
    npu = getattr(torch, "npu", None) if "torch_npu" in sys.modules else None
    if npu is None or not npu.is_available():
        return None
    if device is None and not npu.is_initialized():
        return None
    if not hasattr(npu, "MemPool"):
        raise RuntimeError("memtool: NPU regions need torch.npu.MemPool (a torch_npu with memory pools)")
    key = ("npu", tag, backup)
    if key not in _pools:
        if hook_mode == "torch":
            from torch_npu.npu.memory import NPUPluggableAllocator

            allocator = NPUPluggableAllocator(_collector_handle.path(), "memtool_npu_malloc", "memtool_npu_free")
            _pools[key] = npu.MemPool(allocator.allocator())
        else:
            _pools[key] = npu.MemPool()
    return _pools[key]


def _device_pool(tag, backup, device):
    """The region's pool and the module whose use_mem_pool enters it, or (None, None)."""
    pool = _cuda_pool(tag, backup, device) if device != "npu" else None
    if pool is not None:
        return pool, sys.modules["torch"].cuda
    pool = _npu_pool(tag, backup, device)
    return (pool, sys.modules["torch"].npu) if pool is not None else (None, None)


def _cuda_pool(tag, backup, device):
    """The caching allocator's pool for this region, or None when CUDA is not in use.

    Region segments must never serve tensors outside the region (a pause would
    take their memory away): each region gets a MemPool of its own. Used when
    CUDA is initialized already, or when the region asks for it (device="cuda").
    """
    torch = sys.modules.get("torch")
    if torch is None or device in ("cpu", "npu") or not torch.cuda.is_available():
        return None
    if device is None and not torch.cuda.is_initialized():
        return None
    if not hasattr(torch.cuda, "MemPool"):
        raise RuntimeError("memtool: CUDA regions need torch.cuda.MemPool (PyTorch 2.5 or later)")
    if hook_mode == "preload" and "expandable_segments:true" in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "").lower():
        raise RuntimeError("memtool: CUDA regions in 'preload' mode do not work with expandable segments "
                           "(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True maps memory memtool cannot pause); "
                           "unset it, or use memtool.set_hook_mode('torch')")
    key = ("cuda", tag, backup)
    if key not in _pools:
        if hook_mode == "torch":
            path = _collector_handle.path()
            allocator = torch.cuda.memory.CUDAPluggableAllocator(path, "memtool_cuda_malloc", "memtool_cuda_free")
            _pools[key] = torch.cuda.MemPool(allocator.allocator())
        else:
            _pools[key] = torch.cuda.MemPool()
    return _pools[key]


@dataclass(frozen=True)
class Result:
    """What a pause or resume did."""

    ok: bool            # False: it failed; `message` says why and what was left as it was
    changed: bool       # some memory was paused or resumed
    bytes: int          # physical bytes released or restored
    regions: int        # regions (a tag on a device) touched
    allocations: int
    seconds: float
    message: str

    def __bool__(self):
        return self.ok


@dataclass(frozen=True)
class Region:
    tag: str
    device: str         # "cpu", "cuda:0", ...
    bytes: int          # live bytes, resident or paused
    resident_bytes: int
    paused_bytes: int
    state: str          # "resident", "paused", "partly paused"
    backup: str         # "none", "host", "disk"


def _disabled(what):
    global _warned
    with _warn_lock:
        if not _warned:
            _warned = True
            warnings.warn(f"memtool.{what}: this process does not run under `memtool run`; "
                          "regions, pause and resume do nothing", RuntimeWarning, stacklevel=3)
    return Result(ok=True, changed=False, bytes=0, regions=0, allocations=0, seconds=0.0,
                  message="memtool is not enabled in this process")


class VerifyError(RuntimeError):
    """A verified region's content came back different from what was paused
    (memtool.region(..., verify=True), memtool run --verify). Its `result` is
    the resume's Result; the message names the allocation."""

    def __init__(self, result):
        super().__init__(result.message)
        self.result = result


def region(tag="default", backup="none", device=None, verify=False, graphs=False):
    """Allocations this thread makes inside the block belong to region `tag`.

    backup: "none" (content undefined after a resume), "host" (CUDA memory, kept in
    pinned host memory while paused) or "disk". Each allocation keeps the backup of
    the block it was made in: one tag may be entered with several. Nested regions:
    the innermost wins. device: None (CPU storages, and CUDA or NPU ones when
    CUDA or torch_npu is initialized already), "cuda" (CUDA is initialized for the
    region's pool), "npu" (Ascend NPU memory: torch_npu's, or the Ascend runtime's
    own allocations) or "cpu" (CPU only). verify: every pause of the tag
    checksums each backed-up allocation's content (on its device) and every
    resume checks it; content that comes back different makes resume() raise
    VerifyError naming the allocation (memtool run --verify: every tag).
    graphs: the block captures CUDA graphs (torch.cuda.graph, torch.compile's
    "reduce-overhead"): their pools' memory is the region's, so a pause releases
    it and a resume maps it back at the same addresses, and the graphs replay as
    before. The region then has no MemPool of its own (a capture allocates from its
    graph's pool); the preload hook mode only.
    """
    if graphs and hook_mode == "torch":
        raise RuntimeError("region(graphs=True) needs the preload hook mode (as torch_memory_saver's "
                           "cuda_graph)")
    return _region(tag, backup, device, cpu=True, pool=not graphs, verify=verify)


@contextlib.contextmanager
def _region(tag, backup, device, cpu, pool=True, verify=False):
    # cpu=False (the torch_memory_saver shim): CPU allocations pass the region by,
    # to where they would go outside it; only the device allocator is served.
    # pool=False: no MemPool of the region's own (inside a CUDA graph's capture,
    # whose pool serves the allocations).
    if backup not in _BACKUPS:
        raise ValueError(f"backup must be one of {', '.join(_BACKUPS)}, not {backup!r}")
    if not isinstance(tag, str) or not tag:
        raise ValueError("a region tag is a non-empty string")
    if device not in (None, "cpu", "cuda", "npu"):
        raise ValueError(f"device is None, 'cpu', 'cuda' or 'npu', not {device!r}")
    if not enabled:
        yield
        return
    _collector_handle.region_enter(tag, _BACKUPS[backup] | (0 if cpu else _DEVICE_ONLY)
                                   | (_VERIFY if verify else 0))
    try:
        pool, module = _device_pool(tag, backup, device) if pool else (None, None)
        if pool is None:
            yield
        else:
            with module.use_mem_pool(pool):
                yield
    finally:
        _collector_handle.region_exit()


@contextlib.contextmanager
def outside_regions():
    """Allocations in the block are the program's own, not pausable, even inside a region."""
    if not enabled:
        yield
        return
    _collector_handle.region_enter(None, 0)
    try:
        torch = sys.modules.get("torch")
        if _pools and torch is not None:
            # Out of the region's pool too: a fresh one, dropped after the block.
            module = torch.npu if any(key[0] == "npu" for key in _pools) else torch.cuda
            with module.use_mem_pool(module.MemPool()):
                yield
        else:
            yield
    finally:
        _collector_handle.region_exit()


def _result(answer):
    return Result(ok=answer["ok"], changed=answer["changed"], bytes=answer["bytes"], regions=answer["regions"],
                  allocations=answer["allocations"], seconds=answer["seconds"], message=answer["message"])


def pause(tag=None):
    """Releases the physical memory of every allocation of `tag` (None: every tag)."""
    if not enabled:
        return _disabled("pause")
    return _result(_collector_handle.pause(tag))


def resume(tag=None):
    """Gives back the memory of `tag` (None: every tag) at the same addresses."""
    if not enabled:
        return _disabled("resume")
    answer = _collector_handle.resume(tag)
    if answer.get("verify_failed"):
        raise VerifyError(_result(answer))
    return _result(answer)


def yield_memory(to="disk"):
    """Yields every region's memory now (pytorch_memlab's Courtesy, at a point of
    the program's choosing): CPU memory to disk, CUDA and NPU memory to `to` ("host" or
    "disk"), whatever each region's own backup says. Nothing may touch it until
    restore(). Under `memtool run --pausable all` that is every allocation."""
    if to not in ("host", "disk"):
        raise ValueError(f"to is 'host' or 'disk', not {to!r}")
    if not enabled:
        return _disabled("yield_memory")
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()  # what the caching allocator holds unused needs no backup
    return _result(_collector_handle.courtesy("memtool_yield", 1 if to == "host" else 0))


def restore():
    """Gives back what yield_memory() took, at the same addresses, with its content."""
    if not enabled:
        return _disabled("restore")
    answer = _collector_handle.courtesy("memtool_restore", None)
    if answer.get("verify_failed"):
        raise VerifyError(_result(answer))
    return _result(answer)


def set_backup_dir(path):
    """Disk backups (backup="disk", yield_memory's) go to `path` from now on, in
    place of `memtool run --backup-dir`'s: an existing directory this process can
    write (ValueError otherwise). Outside `memtool run` it does nothing."""
    if not enabled:
        _disabled("set_backup_dir")
        return
    _collector_handle.set_backup_dir(os.fspath(path))


def set_host_pool(max_bytes):
    """Host backups (backup="host", yield_memory(to="host")) are pinned host
    memory, which a resume keeps for the next pause, pinning being slow: at most
    `max_bytes` of it from now on (None: all of it, `memtool run --host-pool`'s
    default; 0: none, a resume gives it all back), what is kept beyond it freed
    now. Returns the bytes kept. Outside `memtool run` it does nothing."""
    if max_bytes is not None and (isinstance(max_bytes, bool) or not isinstance(max_bytes, int)
                                  or max_bytes < 0):
        raise ValueError(f"max_bytes must be None or a number of bytes >= 0, not {max_bytes!r}")
    if not enabled:
        _disabled("set_host_pool")
        return 0
    return _collector_handle.set_host_pool((1 << 64) - 1 if max_bytes is None else min(max_bytes, (1 << 64) - 1))


def set_host_budget(max_bytes):
    """Host backups and the pinned memory a resume keeps for the next pause
    hold at most `max_bytes` of host memory from now on (None: no budget, the
    default; `memtool run --host-budget`'s figure): a pause or yield whose
    region's host backup would go beyond it puts that region on disk instead,
    and its Result's message says how much went there. Outside `memtool run` it
    does nothing."""
    if max_bytes is not None and (isinstance(max_bytes, bool) or not isinstance(max_bytes, int)
                                  or max_bytes < 0):
        raise ValueError(f"max_bytes must be None or a number of bytes >= 0, not {max_bytes!r}")
    if not enabled:
        _disabled("set_host_budget")
        return
    _collector_handle.set_host_budget((1 << 64) - 1 if max_bytes is None else min(max_bytes, (1 << 64) - 1))


def set_memory_margin(nbytes):
    """A new CUDA region allocation must leave `nbytes` of the device free (0,
    the default: no margin): one that would leave less fails as the device
    being full would, and the first refusal is said on stderr. For processes
    that share a GPU. Outside `memtool run` it does nothing."""
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or not 0 <= nbytes < 1 << 64:
        raise ValueError(f"nbytes must be a number of bytes >= 0, not {nbytes!r}")
    if not enabled:
        _disabled("set_memory_margin")
        return
    _collector_handle.set_memory_margin(nbytes)


def read_backup(tensor):
    """The content of a tensor of a paused region, read from the region's backup
    (disk or host) into a new CPU tensor of the same shape and dtype; the region
    stays paused and the tensor untouched. ValueError when the tensor is not
    paused, was paused without a backup, or is not contiguous."""
    if not enabled:
        raise RuntimeError("memtool.read_backup needs `memtool run`")
    import torch
    if not tensor.is_contiguous():
        raise ValueError("read_backup reads contiguous tensors only")
    with outside_regions():
        out = torch.empty(tensor.shape, dtype=tensor.dtype, device="cpu")
    _collector_handle.read_backup(tensor.data_ptr(), out.data_ptr(), tensor.numel() * tensor.element_size())
    return out


def regions():
    """Every region: tag, device, bytes, state, backup."""
    if not enabled:
        return []
    return [Region(**r) for r in _collector_handle.regions()]


def report_tensors(model=None, device=None, verbose=False, file=None):
    """Prints pytorch_memlab's MemReporter table for this process: per device,
    the tensors Python can reach (named from the live modules and optimizers;
    `model`'s first, named within it), each storage counted once; then, under `memtool run`,
    the storages no such tensor owns (autograd's saved tensors, C++ buffers) with
    where they were allocated, and the reconciliation with the device's live
    bytes. `verbose` lists those one by one. Returns the report as a dict."""
    visible = _live.visible_tensors(model=model, device=device)
    if not enabled:
        _disabled("report_tensors")
        report = {"tensors": visible}
        text = _live.format_visible(visible)
    else:
        answer = _run.ask(_collector_handle, {"op": "tensors", "tensors": visible, "device": device,
                                              "verbose": bool(verbose)})
        report, text = answer["body"], answer["text"]
    print(text, end="", file=file if file is not None else sys.stdout)
    return report


def snapshot(path):
    """Writes a trace.json of this process as of now (devices, hotspots, lines;
    what is live counted as current) to `path`, readable by memtool report, check
    and diff. The program runs on. Returns the path."""
    if not enabled:
        _disabled("snapshot")
        raise RuntimeError("memtool.snapshot needs `memtool run`")
    answer = _run.ask(_collector_handle, {"op": "snapshot"})
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(answer["trace"])
    os.replace(tmp, path)
    return path


def load_ipython_extension(ipython):
    """`%load_ext memtool`: the %%memtool, %memtool and %memtool_tensors magics (_ipython.py)."""
    from . import _ipython
    _ipython.load_ipython_extension(ipython)


def allocated(device=None):
    """Bytes allocated so far on `device` (None: every device; "cuda": every CUDA
    device; "cuda:1", "cpu" or a torch.device), exact, as memtool run counted
    them: a Bytes(bytes, text)."""
    return _counters.device_figure(_collector_handle, "allocated", "allocated_bytes", device)


def freed(device=None):
    """Bytes freed so far on `device` (as allocated())."""
    return _counters.device_figure(_collector_handle, "freed", "freed_bytes", device)


def current(device=None):
    """Bytes held now on `device` (resident; paused regions' bytes not counted)."""
    return _counters.device_figure(_collector_handle, "current", "current_bytes", device)


def peak(device=None):
    """The peak so far of the bytes held on `device`; over several devices, the sum
    of their peaks."""
    return _counters.device_figure(_collector_handle, "peak", "peak_bytes", device)


def top_sites(device=None, n=10, by="allocated"):
    """The `n` sites that allocated most (by="allocated"), freed most of what they
    allocated ("freed") or hold most now ("live"), on `device`: Site(device, site,
    allocated_bytes, freed_bytes, live_bytes), the site named as memtool's tables
    name it (the user's file:line)."""
    return _counters.top_sites(_collector_handle, device, n, by)


def set_policy(policy):
    """This process's memory policy (docs/policies.md): memtool's document (a dict,
    its JSON text or a file's path), MemLord's auto-GC strategy dict ({(0, 50):
    {"metric": "max", "threshold": {"percent": 50.0}}, ...}: its gc rules), or
    None to end it. memtool run reads the devices every interval_ms and acts on
    the rules; returns them, one line each. Raises ValueError, naming the rule,
    for a policy it refuses (nothing of it applied)."""
    return _policy.set_policy(_collector_handle, policy)


def policy():
    """This process's memory policy as memtool run holds it (a dict), or None."""
    return _policy.policy(_collector_handle)


def adopt(objects, tag, backup="disk", keep_1d=True, layer_types=None):
    """Moves existing tensors into region `tag`, so that pause(tag) releases them
    and resume(tag) gives them back: a tensor, a list of tensors, or a module's
    parameters and buffers (only those of modules of `layer_types`, a tuple of
    classes, when given). 1-D ones (biases, norms' scales) stay resident unless
    keep_1d=False. Every tensor object, parameter, gradient and optimizer reference
    stays valid; a storage several of them view is moved once; data_ptr changes at
    the adopt and never after it. Returns Adopted(tag, tensors, storages, bytes, kept)."""
    if not enabled:
        raise RuntimeError("memtool.adopt needs memtool's collector (memtool run, or memtool.track)")
    return _adopt.adopt(region, objects, tag, backup, keep_1d, layer_types)


def offload(module, to="disk", prefetch=False, optimizer=None, tag=None, keep_1d=True, layer_types=None):
    """Adopts `module`'s parameters and pauses them (to "host" or "disk"; CPU
    memory always goes to disk). With prefetch=True each layer gets its own tag,
    resumed in a pre-hook and paused again after it ran, forward and backward, so
    that a model larger than the device runs layer by layer; with `optimizer`,
    every layer is resumed for its step and paused after. Returns an Offloaded
    (tags, adopted; remove() takes the hooks away and leaves it all resident)."""
    if not enabled:
        raise RuntimeError("memtool.offload needs memtool's collector (memtool run, or memtool.track)")
    return _adopt.offload(sys.modules[__name__], module, to, prefetch, optimizer, tag, keep_1d, layer_types)
