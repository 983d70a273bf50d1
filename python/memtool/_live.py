"""The tensors Python can reach, named as pytorch_memlab's MemReporter names them.

Runs on the main thread with the GIL held: from `memtool ctl PID tensors` (the
collector calls visible_tensors_json() from the interpreter's pending-call
mechanism, between two bytecodes) and from memtool.report_tensors(). The caller
(memtool run) adds what Python cannot see: the storages the allocator holds that
no tensor here owns, with their allocation sites.

Names, without being told the model:
  - every live nn.Module that is no other module's child is walked: parameters,
    buffers, and `.grad` as `name.grad`; a module bound to a variable of
    `__main__` takes that name as prefix, any other its class name;
  - optimizer state as `Opt.param.state` (e.g. `Adam.model.0.weight.exp_avg`);
  - a tensor bound to a variable of `__main__` takes its name (memlab says
    `TensorN` there), and its gradient `name.grad`;
  - every other tensor that Python code can reach (from a container, an object, a
    variable of a running function) is `Tensor0`, `Tensor1`, ... in the garbage
    collector's order.
A tensor whose Python object only torch keeps (PyTorch preserves the object of a
tensor autograd saved after Python let go of it) is not visible: no Python code
can reach it, and it is reported with what Python cannot see, by allocation site.
`model=` names that module's tensors without prefix, as memlab does, and lists
them first; every other tensor is listed after them, named as without `model=`.
"""
import gc
import json
import sys
import warnings


def _storage(t):
    """(address, bytes) of a tensor's storage; None when it has none (sparse, meta)."""
    try:
        s = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
        return s.data_ptr(), s.nbytes()
    except Exception:  # sparse and other storage-less layouts
        return None


# A sparse tensor has no storage of its own: its memory is its component tensors,
# each with a storage, named after it as pytorch_memlab's MemReporter lists them
# (COO's indices and values; the compressed layouts' index arrays and values).
_SPARSE_PARTS = {
    "sparse_coo": ("_indices", "_values"),
    "sparse_csr": ("crow_indices", "col_indices", "values"),
    "sparse_csc": ("ccol_indices", "row_indices", "values"),
    "sparse_bsr": ("crow_indices", "col_indices", "values"),
    "sparse_bsc": ("ccol_indices", "row_indices", "values"),
}


def _parts(name, t):
    """[(name, tensor)] with storages: `t` itself, or a sparse tensor's components."""
    layout = str(getattr(t, "layout", "")).replace("torch.", "")
    parts = _SPARSE_PARTS.get(layout)
    if parts is None:
        return [(name, t)]
    return [(f"{name}.{part}", getattr(t, part)()) for part in parts]


def _main_bindings():
    """The variables of `__main__`, read once: [(name, value)] in the order it
    binds them, dunders left out. Names modules and tensors alike."""
    main = sys.modules.get("__main__")
    return [(n, v) for n, v in (list(vars(main).items()) if main is not None else ()) if not n.startswith("__")]


def _named(torch, model):
    """[(name, tensor)] in naming order; one tensor may have several names. With
    `model`, its tensors (named within it) come first, then everything else."""
    if model is None:
        return _named_from(torch, None)
    mine = _named_from(torch, model)
    ids = {id(t) for _, t in mine}
    return mine + [(n, t) for n, t in _named_from(torch, None) if id(t) not in ids]


def _named_from(torch, model):
    """[(name, tensor)]: `model`'s tensors alone, or (None) every tensor Python reaches."""
    out = []
    bindings = _main_bindings() if model is None else []
    if model is not None:
        roots = [("", model)]
    else:
        modules = [o for o in gc.get_objects() if isinstance(o, torch.nn.Module)]
        children = set()
        for m in modules:
            for c in m.children():
                children.add(id(c))
        bound = {}  # id(object) -> the first name __main__ binds it to
        for name, value in bindings:
            bound.setdefault(id(value), name)
        roots = [(bound.get(id(m), type(m).__name__), m) for m in modules if id(m) not in children]
        # Bound modules first, in the order __main__ binds them; then the rest as gc found them.
        order = {k: i for i, k in enumerate(bound)}
        roots.sort(key=lambda r: order.get(id(r[1]), len(order)))
    seen_modules = set()
    for prefix, root in roots:
        for mod_name, m in root.named_modules(prefix=prefix):
            if id(m) in seen_modules:
                continue
            seen_modules.add(id(m))
            for kind in ("_parameters", "_buffers"):
                for name, t in getattr(m, kind, {}).items():
                    if t is None:
                        continue
                    full = f"{mod_name}.{name}" if mod_name else name
                    out.append((full, t))
                    if kind == "_parameters" and t.grad is not None:
                        out.append((full + ".grad", t.grad))
    first_name = {}
    for name, t in out:
        first_name.setdefault(id(t), name)
    for opt in (o for o in gc.get_objects() if isinstance(o, torch.optim.Optimizer)):
        i = 0
        for group in opt.param_groups:
            for p in group["params"]:
                pname = first_name.get(id(p), f"param{i}")
                i += 1
                if model is not None and id(p) not in first_name:
                    continue  # another model's parameter
                for key, value in opt.state.get(p, {}).items():
                    if isinstance(value, torch.Tensor):
                        out.append((f"{type(opt).__name__}.{pname}.{key}", value))
    named_ids = {id(t) for _, t in out}
    if model is None:
        for name, value in bindings:
            if not isinstance(value, torch.Tensor) or id(value) in named_ids:
                continue
            out.append((name, value))
            named_ids.add(id(value))
            grad = value.grad if value.requires_grad else None
            if grad is not None and id(grad) not in named_ids:
                out.append((name + ".grad", grad))
                named_ids.add(id(grad))
        candidates = [o for o in gc.get_objects() if isinstance(o, torch.Tensor) and id(o) not in named_ids]
        reachable = _reachable(candidates)
        n = 0
        for t in candidates:
            if id(t) in reachable:
                out.append((f"Tensor{n}", t))
                n += 1
    return out


_CO_OPTIMIZED = 0x1  # a function's code: fast locals, not a namespace dict


def _reachable(candidates):
    """ids of the tensors among `candidates` that something of Python's refers to:
    a container or object the garbage collector tracks, or a variable of a running
    function (any thread's). What is left is held from C++ alone."""
    if not candidates:
        return set()
    ids = {id(t) for t in candidates}
    found = set()
    here = __file__
    frames = []
    try:
        for f in sys._current_frames().values():
            while f is not None:
                frames.append(f)
                f = f.f_back
        for f in frames:
            if f.f_code.co_filename == here:
                continue
            # Before 3.13 a function's f_locals is a snapshot dict the frame keeps:
            # left filled, it would hold the function's tensors past a `del`.
            snapshot = sys.version_info < (3, 13) and f.f_code.co_flags & _CO_OPTIMIZED
            values = f.f_locals
            for v in values.values():
                if id(v) in ids:
                    found.add(id(v))
            if snapshot:
                values.clear()
            values = None
        # Passed as a tuple of our own, which is then the only argument tuple that can
        # show up (3.13 lists it): telling it apart by its items took a program's own
        # tuple of exactly the candidates (pytorch_memlab's `out, _ = lstm(inp)`) for it.
        args = tuple(candidates)
        for r in gc.get_referrers(*args):
            if r is candidates or r is frames or r is args:
                continue  # our own list and tuple
            if type(r).__name__ == "frame" and r.f_code.co_filename == here:
                continue
            for x in gc.get_referents(r):
                if id(x) in ids:
                    found.add(id(x))
    finally:
        # `frames` holds this very frame, whose locals hold `frames` and the
        # candidates: a cycle that would keep tensors torch is about to free.
        frames.clear()
        f = r = x = v = args = values = None
    return found


def visible_tensors(model=None, device=None):
    """Python-visible tensors: a list of dicts (name, device, shape, dtype, storage
    address, storage bytes, bytes counted here, owner when the storage is another's)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return []
    with warnings.catch_warnings():  # isinstance() on every object wakes deprecation warnings
        warnings.simplefilter("ignore")
        named = _named(torch, model)
    rows, owners = [], {}
    for name, t in (part for named_tensor in named for part in _parts(*named_tensor)):
        where = str(t.device)
        if device is not None and where != device:
            continue
        storage = _storage(t)
        if storage is None:
            continue
        address, nbytes = storage
        owner = owners.get((where, address)) if address else None
        if address and owner is None:
            owners[(where, address)] = name
        rows.append({"name": name, "device": where, "shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""),
                     "address": address, "storage_bytes": nbytes, "bytes": 0 if owner else nbytes,
                     "owner": owner})
    return rows


def visible_tensors_json(device=None):
    """What the collector calls for `memtool ctl PID tensors`: compact JSON text."""
    return json.dumps({"tensors": visible_tensors(device=device or None)}, separators=(",", ":"))


def format_visible(rows):
    """The Python-visible part alone, as text (outside `memtool run`, where what
    Python cannot see is unknown)."""
    lines = []
    for device in sorted({r["device"] for r in rows}):
        lines.append(f"Storage on {device}")
        total = 0
        for r in (r for r in rows if r["device"] == device):
            name = f"{r['name']}(->{r['owner']})" if r["owner"] else r["name"]
            shape = "(" + ", ".join(str(n) for n in r["shape"]) + ")"
            lines.append(f"  {name:<50} {shape:>20} {r['bytes']:>14,} B")
            total += r["bytes"]
        lines.append(f"  Python-visible: {total:,} B (what Python cannot see needs `memtool run`)")
    return "\n".join(lines) + "\n" if lines else "No tensors.\n"


# Objects that hold no tensor: skipped by type (not isinstance, which a lazy
# module's __class__ can answer slowly, with a warning) to keep the walk short.
_LEAF_TYPES = frozenset((str, bytes, int, float, complex, bool, type(None), type(gc.collect), type(_storage.__code__)))


def _storage_address(t):
    """A dense tensor's storage's data pointer, worked out from its own: asking for
    the storage makes a Python object torch then preserves (PyObject preservation),
    which kept the program's storages past the interpreter's teardown."""
    try:
        return t.data_ptr() - t.storage_offset() * t.element_size()
    except Exception:  # storage-less layouts
        return 0


def _label(text):
    """A name as the collector's list carries it: no spaces, no '@', at most 200 bytes
    of UTF-8 (the CLI refuses a longer one, and with it the whole list)."""
    clean = "".join(c if c.isprintable() and c not in " @" else "_" for c in text)
    return clean.encode("utf-8", "replace")[:200].decode("utf-8", "ignore")


def reachable_storages():
    """[(address, name)]: the storages (data pointers, non-zero) of the tensors the
    program's globals still reach, each with the global it was first reached from
    (`kept` for a variable of `__main__`, `module.name` for another module's), through
    what the garbage collector can see (containers, objects, closures), gradients
    too. __main__'s variables come first, in the order it binds them. What a
    reference cycle alone keeps, or C code alone, is not among them. The collector
    calls it as the interpreter begins to finalize (held_at_exit_bytes and
    held_by, docs/TRACE.md); a storage's data pointer is its allocator block's
    address."""
    torch = sys.modules.get("torch")
    if torch is None:
        return []
    tensor_type = torch.Tensor
    main = sys.modules.get("__main__")
    modules = [("", main)] if main is not None else []
    modules += [(f"{name}.", m) for name, m in list(sys.modules.items()) if m is not main and m is not None]
    # A module's namespace is entered only as that module's: a function's
    # __globals__ must not name another variable's tensors after the function.
    seen = {id(m) for _, m in modules}
    namespaces = []
    for prefix, m in modules:
        space = getattr(m, "__dict__", None)
        if isinstance(space, dict):
            seen.add(id(space))
            namespaces.append((prefix, list(space.items())))
        else:  # a module-like object without a namespace: walked whole, under its name
            namespaces.append(("", [(prefix[:-1], m)]))
    found = {}
    for prefix, items in namespaces:
        for var, value in items:
            label = prefix + var
            todo = [value]
            while todo:
                o = todo.pop()
                kind = type(o)
                if kind in _LEAF_TYPES or id(o) in seen:
                    continue
                seen.add(id(o))
                if issubclass(kind, tensor_type):
                    for _, part in _parts("", o):
                        address = _storage_address(part)
                        if address:
                            found.setdefault(address, label)
                    grad = getattr(o, "_grad", None) if o.requires_grad else None
                    if grad is not None:
                        todo.append(grad)
                todo.extend(gc.get_referents(o))
    return sorted(found.items())


def reachable_storages_text():
    """reachable_storages() as the collector sends it: `address@name` (hex), space-separated."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return " ".join(f"{a:x}@{_label(n)}" for a, n in reachable_storages())
