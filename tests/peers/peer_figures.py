"""What each tool counted, reduced to the same figures: the torch storages
c10::alloc_cpu made, per process and per call stack (memtool's trace.json,
memray's capture files) and per profiler op (torch.profiler's key_averages and
its memory records). The target programs import profiler_figures only (nothing
of memray or memtool there); check_peers.py the rest."""

import re
import subprocess
from collections import defaultdict

ALLOC_CPU = "c10::alloc_cpu(unsigned long)"
# Source files of CPython's own tree, as its debug info names them.
CPYTHON_SOURCE = re.compile(r"^(\./)?(Include|Objects|Python|Modules|Parser|Programs)/")
ATEN_CALL = re.compile(r"^at::_ops::(\w+)::call\(")
NODE_APPLY = re.compile(r"^torch::autograd::(?:generated::)?(\w+)::apply\(")
NODE_CALL = "torch::autograd::Node::operator()("
EVALUATE_FUNCTION = "torch::autograd::Engine::evaluate_function("
# Scopes the profiler records that are not dispatcher calls: torch.optim opens
# these with torch.autograd.profiler.record_function around the whole of step()
# and zero_grad() (torch/optim/optimizer.py), named after the optimizer's class.
RECORD_FUNCTIONS = {
    ("torch/optim/optimizer.py", "Optimizer.profile_hook_step.<locals>.wrapper"): "Optimizer.step#{}.step",
    ("torch/optim/optimizer.py", "Optimizer.zero_grad"): "Optimizer.zero_grad#{}.zero_grad",
}
# The profiler's row for records inside no event.
TOP_LEVEL = "[memory]"
# The engine's events, "autograd::engine::evaluate_function: NODE", as one row:
# after a node's apply returns, evaluate_function checks its outputs
# (validate_outputs), where InputMetadata::reduce_grad sums a gradient down to its
# input's shape (at::_sum_to, aten::sum): that storage is made inside the node's
# evaluate_function event, but no frame of its stack names the node any longer.
EVALUATE_FUNCTION_ROW = "autograd::engine::evaluate_function: *"


def op_row():
    return {"alloc_bytes": 0, "alloc_count": 0, "free_bytes": 0, "free_count": 0}


def profiler_figures(prof):
    """torch.profiler's per-op CPU memory figures, and the records they are made of.

    key_averages() gives, per op name, `cpu_memory_usage`: the signed sum (+bytes
    for an allocation, -bytes for a free) of the memory records whose time lies in
    an invocation's [start, end], summed over its invocations, and
    `self_cpu_memory_usage`: the same less its children's (torch/autograd/
    profiler.py, _parse_kineto_results and MemRecordsAcc.in_interval;
    profiler_util.py, FunctionEvent.self_cpu_memory_usage). memtool records no
    stack for a free, so its figures are allocations: here each record goes to
    the events that hold it, as the profiler does (`self`: the innermost one;
    `total`: every one), with allocations and frees summed apart. Their signed
    sums must be key_averages' own two figures, or this is not the profiler's
    attribution.

    `peak_bytes`: the most the records' running sum reached. c10's
    ProfiledCPUMemoryReporter reports a free only for a storage it saw allocated
    while profiling (its size map), so the sum is the live bytes of the storages
    made under the profiler: every storage of the process where the profiler
    was on before the first one."""
    trace_start = prof.profiler.kineto_results.trace_start_ns()
    # Sorted by time alone (a stable sort): records of one nanosecond keep the
    # order they were made in.
    records = sorted(
        (
            ((e.start_ns() - trace_start) / 1000, e.nbytes())
            for e in prof.profiler.kineto_results.events()
            if e.name() == TOP_LEVEL and str(e.device_type()) == "DeviceType.CPU"
        ),
        key=lambda record: record[0],
    )
    # FunctionEvent times are microseconds from the trace's start, as the
    # records' are made here.
    events = sorted(
        (e for e in prof.events() if e.name != TOP_LEVEL and not e.is_async),
        key=lambda e: (e.time_range.start, -e.time_range.end),
    )
    own, total = defaultdict(op_row), defaultdict(op_row)
    holding, i, live, peak = [], 0, 0, 0
    for at, nbytes in records:
        live += nbytes
        peak = max(peak, live)
        while i < len(events) and events[i].time_range.start <= at:
            while holding and holding[-1].time_range.end < events[i].time_range.start:
                holding.pop()
            holding.append(events[i])
            i += 1
        while holding and holding[-1].time_range.end < at:
            holding.pop()
        kind = "alloc" if nbytes > 0 else "free"
        for rows, names in ((own, [holding[-1].name] if holding else [TOP_LEVEL]),
                            (total, [e.name for e in holding] or [TOP_LEVEL])):
            for name in names:
                rows[name][kind + "_bytes"] += abs(nbytes)
                rows[name][kind + "_count"] += 1
    averages = {
        a.key: {"self_cpu_memory_usage": a.self_cpu_memory_usage, "cpu_memory_usage": a.cpu_memory_usage}
        for a in prof.key_averages()
        if a.self_cpu_memory_usage or a.cpu_memory_usage
    }
    return {"self": dict(own), "total": dict(total), "key_averages": averages, "peak_bytes": peak,
            "live_at_end": live}


def aten_op_names():
    """at::_ops::<struct> -> the profiler's op name: torchgen names each
    operator's struct `name_overload` (OperatorName.unambiguous_name)."""
    import torch

    names = {}
    for schema in torch._C._jit_get_all_schemas():
        space, _, name = schema.name.partition("::")
        if space == "aten":
            names[name + ("_" + schema.overload_name if schema.overload_name else "")] = schema.name
    return names


def profiler_scopes(stack, optimizer, op_names):
    """The profiler events a memtool stack (frames, innermost first) stands in,
    innermost first: a dispatcher call (at::_ops::X::call) records the op, its
    redispatch does not (c10::Dispatcher::redispatch runs no RecordFunction); the
    autograd engine records each node it runs twice, "autograd::engine::
    evaluate_function: NAME" (Engine::evaluate_function, here all one row,
    EVALUATE_FUNCTION_ROW) and NAME (Node::operator()), NAME being the node's
    class (its ::apply frame, further in); torch.optim's record_function scopes."""
    scopes, node = [], None
    for f in stack:
        name = f["function"]
        if f["kind"] == "native":
            call, apply = ATEN_CALL.match(name), NODE_APPLY.match(name)
            if call:
                scopes.append(op_names[call.group(1)])
            elif apply:
                node = apply.group(1) if name.startswith("torch::autograd::generated::") else \
                    "torch::autograd::" + apply.group(1)
            elif name.startswith(NODE_CALL):
                scopes.append(node)
            elif name.startswith(EVALUATE_FUNCTION):
                scopes.append(EVALUATE_FUNCTION_ROW)
        else:
            for (suffix, function), scope in RECORD_FUNCTIONS.items():
                if f["file"].endswith(suffix) and name == function:
                    scopes.append(scope.format(optimizer))
    return scopes


def merge_evaluate_function(rows):
    """The profiler's rows with every evaluate_function event's as one."""
    merged = defaultdict(op_row)
    for name, row in rows.items():
        into = merged[EVALUATE_FUNCTION_ROW if name.startswith("autograd::engine::evaluate_function: ") else name]
        for field, value in row.items():
            into[field] += value
    return dict(merged)


def memtool_per_op(process, script, region, optimizer, op_names):
    """memtool's CPU allocations made inside `region` (a function of the script,
    the one the profiler profiled), as the profiler's `self` and `total` rows."""
    own, total = (defaultdict(lambda: {"alloc_bytes": 0, "alloc_count": 0}) for _ in range(2))
    frames = process["frames"]
    for hotspot in process["hotspots"]:
        stack = [frames[i] for i in hotspot["frames"]]
        if hotspot["device"] != "cpu" or not any(
                f["kind"] == "python" and f["file"] == script and f["function"] == region for f in stack):
            continue
        scopes = profiler_scopes(stack, optimizer, op_names)
        # The profiler drops an event whose parent has its name and no other
        # child (EventList._remove_dup_nodes: aten::div.Scalar calling only
        # aten::div.Tensor is one aten::div), so a scope directly inside one of
        # its name counts once; exact where the inner call is its parent's only
        # event, which the comparison with the profiler checks.
        merged = [name for n, name in enumerate(scopes) if n == 0 or scopes[n - 1] != name]
        for rows, names in ((own, scopes[:1] or [TOP_LEVEL]), (total, merged or [TOP_LEVEL])):
            for name in names:
                rows[name]["alloc_bytes"] += hotspot["allocated_bytes"]
                rows[name]["alloc_count"] += hotspot["count"]
    return {"self": dict(own), "total": dict(total)}


def symbol_aliases(modules):
    """name -> the one name kept for its address, for the functions of these ELF
    objects that have more than one name: identical code folded by the linker
    leaves one copy with each name (libtorch_cpu's structured kernels'
    set_output_strided and set_output_raw_strided are one function at one
    address), and each symbolizer names a return address there by a name of its
    choosing. A name found at two addresses keeps itself."""
    names_at, addresses_of = defaultdict(set), defaultdict(set)
    for module in sorted(modules):
        listing = subprocess.run(["nm", "-C", "--defined-only", module], capture_output=True, text=True, check=True)
        for line in listing.stdout.splitlines():
            address, kind, name = (line.split(" ", 2) + ["", ""])[:3]
            if kind in "tTwW" and name:
                names_at[(module, address)].add(name)
                addresses_of[name].add((module, address))
    aliases = {}
    for names in names_at.values():
        kept = sorted(n for n in names if len(addresses_of[n]) == 1)
        if len(kept) > 1:
            aliases.update((n, kept[0]) for n in kept)
    return aliases


def blank_figures():
    return {"alloc_bytes": 0, "alloc_count": 0, "peak_bytes": 0, "live_at_end": 0, "stacks": {}}


def add_stack(stacks, key, nbytes, count):
    row = stacks.setdefault(key, [0, 0])
    row[0] += nbytes
    row[1] += count


def cut_python(frames, outermost, last=False):
    """Python frames (name, file, line), innermost first, up to the first that
    `outermost` holds ((name, file) pairs), which ends the stack; None if none
    does, or if `last` and it is not the outermost frame of all."""
    key = []
    for n, (name, file, line) in enumerate(frames):
        key.append(("py", name, file, line))
        if (name, file) in outermost:
            return key if not last or n == len(frames) - 1 else None
    return None


def memtool_figures(process, outermost, aliases):
    """One process of trace.json: devices.cpu (libc10's posix_memalign and free:
    c10::alloc_cpu's and c10::free_cpu's) and its CPU hotspots by stack_key."""
    figures = blank_figures()
    cpu = process["devices"].get("cpu")
    if not cpu:
        return figures
    figures.update(alloc_bytes=cpu["allocated_bytes"], alloc_count=cpu["alloc_count"],
                   peak_bytes=cpu["peak_bytes"], live_at_end=cpu["leaked_bytes"])
    frames = process["frames"]
    for hotspot in process["hotspots"]:
        if hotspot["device"] != "cpu":
            continue
        stack = [frames[i] for i in hotspot["frames"]]
        native = [("native", aliases.get(f["function"], f["function"])) for f in stack if f["kind"] == "native"]
        # memray names a Python frame by co_name, memtool by co_qualname, whose
        # last dotted part is co_name.
        python = cut_python([(f["function"].rsplit(".", 1)[-1], f["file"], f["line"])
                             for f in stack if f["kind"] == "python"], outermost)
        if python is None:
            raise AssertionError(f"a memtool stack that does not reach {outermost}: {hotspot['stack']}")
        add_stack(figures["stacks"], tuple(native + python), hotspot["allocated_bytes"], hotspot["count"])
    return figures


def memray_figures(path, outermost, aliases, last=False):
    """One memray capture (`memray run --native`, a file per process with
    --follow-fork), reduced to the allocations whose native stack passes through
    c10::alloc_cpu and the frees of their addresses."""
    import memray

    kinds = memray.AllocatorType
    releases = {kinds.FREE, kinds.PYMALLOC_FREE, kinds.MUNMAP}
    figures = blank_figures()
    live, current, keys = {}, 0, {}
    for record in memray.FileReader(path).get_allocation_records():
        if record.allocator in releases:
            # Only libc's free releases what posix_memalign gave; an address not
            # live here is no storage this process made (a fork child frees its
            # parent's too).
            if record.allocator == kinds.FREE and record.address in live:
                current -= live.pop(record.address)
            continue
        ids = (record.stack_id, record.native_stack_id)
        if ids not in keys:
            keys[ids] = memray_stack_key(record, outermost, aliases, last)
        if keys[ids] is None:
            continue
        if record.allocator != kinds.POSIX_MEMALIGN or record.n_allocations != 1:
            raise AssertionError(f"c10::alloc_cpu allocated through {record.allocator!r}: {record}")
        live[record.address] = record.size
        current += record.size
        figures["alloc_bytes"] += record.size
        figures["alloc_count"] += 1
        figures["peak_bytes"] = max(figures["peak_bytes"], current)
        add_stack(figures["stacks"], keys[ids], record.size, 1)
    figures["live_at_end"] = current
    return figures


def memray_stack_key(record, outermost, aliases, last):
    """The stack as memtool writes it, or None when it does not pass through
    c10::alloc_cpu. memtool's native frames run from c10::alloc_cpu out to the
    innermost frame in the interpreter, which is cut with all further out: the
    Python stack stands there (collectors/stacks/StackCapture.h). memray's native
    stack goes on through the interpreter; here its interpreter frames are the
    ones with a source file, as the only object on these stacks built with debug
    info is this interpreter (pip's torch, libgomp, libstdc++ and libc have none:
    memray names their files '<unknown>'), and each such file must be one of
    CPython's tree."""
    native = record.native_stack_trace()
    if not any(name == ALLOC_CPU for name, _, _ in native):
        return None
    key = []
    for name, file, _ in native:
        if file != "<unknown>":
            if not CPYTHON_SOURCE.match(file):
                raise AssertionError(f"a native frame with debug info outside CPython: {name} ({file})")
            break
        key.append(("native", aliases.get(name, name)))
    python = cut_python(record.stack_trace(), outermost, last)
    if python is None:
        raise AssertionError(f"a memray stack that does not reach {outermost}: {record.stack_trace()}")
    return tuple(key + python)
