"""`memtool run --modules`: each nn.Module instance named on the stacks of what its
forward and its backward allocate.

The collector keeps one "module scope" per thread (memtool_module_scope_set): while
it is set, every allocation's Python stack ends in a frame naming it, file
``<memtool:module>``, line 1 in the forward and 2 in the backward, function
``layer1.0.conv1 (Conv2d)`` (the module's path in its root's named_modules(),
then its class). Global forward hooks set it around each module's forward. The
backward has no Python frames of the module's: when a forward returns, the
autograd nodes it made (walked from its outputs back to where its inputs came
from) get a pre-hook and a hook that set the module's backward scope around the
node's own work; a parameter's AccumulateGrad goes with the innermost module that
used it. What no module's forward made stays without a scope.

Needs torch 2.0 or later for the backward (Node.register_prehook, Node.metadata);
on older torch only the forwards are named.
"""
import sys
import threading
import weakref

_FORWARD, _BACKWARD = 1, 2
_LEAF_SEQUENCE = (1 << 64) - 1  # AccumulateGrad's sequence number
_MARK = "memtool"  # the key in a node's metadata once it has memtool's hooks

_lib = None
_names = weakref.WeakKeyDictionary()  # module -> its path under its root ("" for the root)
_ids = {}  # (label, phase) -> scope id
_backward_hooks = {}  # scope id -> (pre-hook, hook)
_local = threading.local()
_state = {"armed": False, "installed": False, "backward": None, "compiling": None, "generation": 0,
          "grad_enabled": None}
_handles = []  # the global hooks' handles, removed by disarm()


def _stack():
    """The calling thread's scopes, innermost last; what a thread kept from before
    the last arm() is dropped."""
    if getattr(_local, "generation", None) != _state["generation"]:
        _local.scopes, _local.seen, _local.generation = [], -1, _state["generation"]
    return _local.scopes


def _set(scopes):
    _lib.memtool_module_scope_set(scopes[-1][0] if scopes else 0)


def _scope_id(label, phase):
    key = (label, phase)
    found = _ids.get(key)
    if found is None:
        found = _ids[key] = _lib.memtool_module_scope(label.encode("utf-8", "replace"), phase)
    return found


def _name(module, scopes):
    name = _names.get(module)
    if name is not None:
        return name
    if not scopes:  # a root: its whole tree is named now
        for path, m in module.named_modules(remove_duplicate=False):
            _names.setdefault(m, path)
        return _names.get(module, "")
    # Called by a module it does not belong to: named under its caller.
    parent = scopes[-1][1]
    name = f"{parent}.{type(module).__name__}" if parent else type(module).__name__
    _names[module] = name
    return name


def _backward():
    """Whether the backward can be named (torch 2.0 or later); known at the first
    forward, when torch has been imported whole."""
    known = _state["backward"]
    if known is None:
        import torch
        node = getattr(getattr(torch.autograd, "graph", None), "Node", None)
        needs = ("register_prehook", "register_hook", "metadata", "_sequence_nr")
        known = _state["backward"] = node is not None and all(hasattr(node, a) for a in needs)
        _state["grad_enabled"] = torch.is_grad_enabled
    return known


def _compiling():
    check = _state["compiling"]
    if check is None:
        import torch
        compiler = getattr(torch, "compiler", None)
        check = getattr(compiler, "is_compiling", None) if compiler else None
        if check is None:
            dynamo = sys.modules.get("torch._dynamo")
            check = getattr(dynamo, "is_compiling", None) if dynamo else None
        _state["compiling"] = check = check or (lambda: False)
    return check()


def _tensors(value, depth=0):
    """The tensors of a forward's inputs or outputs (in tuples, lists and dicts)."""
    if hasattr(value, "grad_fn") and hasattr(value, "requires_grad"):
        yield value
    elif depth < 3 and isinstance(value, (tuple, list)):
        for v in value:
            yield from _tensors(v, depth + 1)
    elif depth < 3 and isinstance(value, dict):
        for v in value.values():
            yield from _tensors(v, depth + 1)


def _low_mark(args):
    """A sequence number no node this forward makes is at or below: the highest of
    the nodes its inputs came from and of every node seen on this thread before
    (autograd numbers a thread's nodes in the order it makes them), so that the
    walk stops where the forward began even for inputs given by keyword."""
    low = _local.seen  # _before_forward read _stack(): this thread's state is current
    for t in _tensors(args):
        node = t.grad_fn
        if node is not None:
            low = max(low, node._sequence_nr())
    return low


def _hooks_for(scope):
    hooks = _backward_hooks.get(scope)
    if hooks is None:
        entry = (scope, None)

        def before(grad_outputs):
            scopes = _stack()
            scopes.append(entry)
            _set(scopes)

        def after(grad_inputs, grad_outputs):
            scopes = _stack()
            if scopes and scopes[-1] is entry:
                scopes.pop()
                _set(scopes)

        hooks = _backward_hooks[scope] = (before, after)
    return hooks


def _hook(node, hooks):
    node.metadata[_MARK] = True
    node.register_prehook(hooks[0])
    node.register_hook(hooks[1])


def _claim(module, output, low, scope):
    """Hooks the nodes this forward made, and its parameters' AccumulateGrad."""
    hooks = _hooks_for(scope)
    params = None
    todo = [t.grad_fn for t in _tensors(output) if t.grad_fn is not None]
    for node in todo:
        sequence = node._sequence_nr()
        if sequence != _LEAF_SEQUENCE and sequence > _local.seen:  # _after_forward read _stack()
            _local.seen = sequence
    seen = {}
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen[id(node)] = node  # alive until the walk ends, so ids stay unique
        sequence = node._sequence_nr()
        if sequence == _LEAF_SEQUENCE:
            if params is None:
                params = {id(p) for p in module.parameters()}
            variable = getattr(node, "variable", None)
            if id(variable) in params and _MARK not in node.metadata:
                _hook(node, hooks)
            continue
        if sequence <= low:
            continue
        if _MARK not in node.metadata:
            _hook(node, hooks)
        for following, _ in node.next_functions:
            if following is not None:
                todo.append(following)


def _before_forward(module, args):
    if _compiling():
        return
    scopes = _stack()
    name = _name(module, scopes)
    cls = type(module).__name__
    label = f"{name} ({cls})" if name else cls
    low = _low_mark(args) if _backward() else -1
    scopes.append((_scope_id(label, _FORWARD), name, module, label, low))
    _set(scopes)


def _after_forward(module, args, output):
    if _compiling():
        return
    scopes = _stack()
    entry = None
    for i in range(len(scopes) - 1, -1, -1):
        if len(scopes[i]) > 2 and scopes[i][2] is module:
            entry = scopes[i]
            del scopes[i:]
            break
    _set(scopes)
    if entry is None or not _backward():
        return
    if _state["grad_enabled"]():  # resolved by _backward()
        _claim(module, output, entry[4], _scope_id(entry[3], _BACKWARD))


def _install(module_module):
    if _state["installed"]:
        return
    _state["installed"] = True
    # torch.compile(module) warns the program about global hooks; these are memtool's,
    # and torch.compile's code runs unmarked (_compiling): the warning is not the program's.
    import warnings
    warnings.filterwarnings("ignore", message=r"Using `torch\.compile\(module\)` when there are global hooks")
    _handles.append(module_module.register_module_forward_pre_hook(_before_forward))
    try:
        _handles.append(module_module.register_module_forward_hook(_after_forward, always_call=True))
    except TypeError:  # torch before 2.0: no always_call
        _handles.append(module_module.register_module_forward_hook(_after_forward))


class _AfterImport:
    """A finder that runs _install once torch.nn.modules.module has been executed."""

    _NAME = "torch.nn.modules.module"

    def find_spec(self, name, path=None, target=None):
        if name != self._NAME:
            return None
        sys.meta_path.remove(self)
        from importlib.machinery import PathFinder
        spec = PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _install(module)

        spec.loader.exec_module = exec_module
        return spec


def arm(lib):
    """Names modules from now on (or from when torch.nn is imported). `lib`: the
    collector's functions through ctypes.PyDLL, which keeps the GIL (a hook runs at
    every module call and autograd node)."""
    global _lib
    if _state["armed"]:
        return
    _state["armed"] = True
    _state["generation"] += 1
    _lib = lib
    lib.memtool_module_scope.argtypes = [_c().c_char_p, _c().c_int]
    lib.memtool_module_scope.restype = _c().c_uint32
    lib.memtool_module_scope_set.argtypes = [_c().c_uint32]
    lib.memtool_module_scope_set.restype = None
    lib.memtool_module_scopes_on.argtypes = [_c().c_int]
    lib.memtool_module_scopes_on.restype = None
    lib.memtool_module_scopes_on(1)
    done = sys.modules.get(_AfterImport._NAME)
    if done is not None and hasattr(done, "register_module_forward_hook"):
        _install(done)
    else:
        sys.meta_path.insert(0, _AfterImport())


def disarm():
    """memtool.track(modules=True)'s end: the global hooks go, and no scope set
    before counts (a scope id stays valid: the nodes hooked already still run
    their hooks, which then only set a word of their thread's)."""
    if not _state["armed"]:
        return
    for handle in _handles:
        handle.remove()
    _handles.clear()
    for finder in [f for f in sys.meta_path if isinstance(f, _AfterImport)]:
        sys.meta_path.remove(finder)
    _lib.memtool_module_scopes_on(0)
    _state["armed"] = _state["installed"] = False


def _c():
    import ctypes
    return ctypes
