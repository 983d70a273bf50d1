"""memtool.adopt() and memtool.offload(): existing tensors put in region memory,
so that pause and resume release and restore them (the module-wrapping idea of
offload managers, without wrapping: every tensor object, the module, its
gradients and the optimizer's references stay the same objects).

A storage is moved once, whatever number of the tensors given view it: a new
storage of the same size is made inside the region, the bytes are copied, and
each tensor is set to it with its own offset, size and strides. Its data_ptr
changes once, at adopt(), and never again: resume gives the same addresses."""
import warnings
from dataclasses import dataclass, field


@dataclass
class Adopted:
    tag: str
    tensors: int                 # tensors moved (views of one storage each count)
    storages: int
    bytes: int                   # bytes of the storages moved
    kept: list = field(default_factory=list)   # names left resident (1-D, not of layer_types)


def _named_tensors(objects, keep_1d, layer_types):
    """(name, tensor) to move and the names kept: a module's parameters and
    buffers (those of modules of `layer_types` only, when given), or tensors."""
    import torch

    moved, kept = [], []
    if isinstance(objects, torch.nn.Module):
        modules = [(n, m) for n, m in objects.named_modules()
                   if layer_types is None or isinstance(m, tuple(layer_types))]
        seen = set()
        for prefix, m in modules:
            for kind in (m.named_parameters(recurse=False), m.named_buffers(recurse=False)):
                for n, t in kind:
                    if t is None or id(t) in seen:
                        continue
                    seen.add(id(t))
                    name = f"{prefix}.{n}" if prefix else n
                    (kept if keep_1d and t.dim() <= 1 else moved).append((name, t))
        return moved, kept
    if isinstance(objects, torch.Tensor):
        objects = [objects]
    for i, t in enumerate(objects):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"adopt takes a module, a tensor or tensors, not {type(t).__name__}")
        (kept if keep_1d and t.dim() <= 1 else moved).append((str(i), t))
    return moved, kept


def adopt(region, objects, tag, backup, keep_1d, layer_types):
    import torch

    moved, kept = _named_tensors(objects, keep_1d, layer_types)
    by_storage = {}
    for name, t in moved:
        by_storage.setdefault((t.device, t.untyped_storage().data_ptr()), []).append(t)
    nbytes = 0
    with torch.no_grad():
        for (device, _), tensors in by_storage.items():
            old = tensors[0].untyped_storage()
            with region(tag, backup):
                new = torch.empty(old.nbytes(), dtype=torch.uint8, device=device)
            new.copy_(torch.empty(0, dtype=torch.uint8, device=device).set_(old))
            storage = new.untyped_storage()
            for t in tensors:
                t.set_(storage, t.storage_offset(), t.size(), t.stride())
            nbytes += old.nbytes()
    return Adopted(tag, len(moved), len(by_storage), nbytes, [n for n, _ in kept])


class Offloaded:
    """What offload() did: the tags (one per layer with prefetch, else one), what
    each adopted, and the hooks it set; remove() takes the hooks away and leaves
    every tag resident."""

    def __init__(self, tags, adopted, hooks, resume):
        self.tags, self.adopted, self._hooks, self._resume = tags, adopted, hooks, resume

    def remove(self):
        for h in self._hooks:
            h.remove()
        self._hooks = []
        for tag in self.tags:
            self._resume(tag)


def offload(memtool, module, to, prefetch, optimizer, tag, keep_1d, layer_types):
    import torch

    if to not in ("host", "disk"):
        raise ValueError(f"to is 'host' or 'disk', not {to!r}")
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"offload takes a module, not {type(module).__name__}")
    # CPU memory has no host backup to go to: its content goes to disk.
    backup = to if next(module.parameters()).is_cuda else "disk"
    tag = tag or f"offload:{type(module).__name__}"
    if not prefetch:
        adopted = [memtool.adopt(module, tag, backup, keep_1d, layer_types)]
        _checked(memtool.pause(tag), "pause", tag)
        return Offloaded([tag], adopted, [], memtool.resume)
    # One tag per layer that holds something to move: each is resident only while
    # it runs, forward and backward.
    layers = [(n, m) for n, m in module.named_modules()
              if (layer_types is None or isinstance(m, tuple(layer_types)))
              and any(True for _ in m.parameters(recurse=False))]
    tags, adopted, hooks = [], [], []
    for name, layer in layers:
        layer_tag = f"{tag}.{name}" if name else tag
        a = memtool.adopt(layer, layer_tag, backup, keep_1d, None)
        if a.tensors == 0:
            continue
        tags.append(layer_tag)
        adopted.append(a)
        hooks += _prefetch_hooks(memtool, layer, layer_tag)
    if optimizer is not None:
        hooks.append(optimizer.register_step_pre_hook(lambda *_: _all(memtool.resume, tags)))
        hooks.append(optimizer.register_step_post_hook(lambda *_: _all(memtool.pause, tags)))
    _all(memtool.pause, tags)
    return Offloaded(tags, adopted, hooks, memtool.resume)


def _checked(result, action, tag):
    if not result.ok:
        raise RuntimeError(f"memtool could not {action} {tag!r}: {result.message}")
    return result


def _all(act, tags):
    for t in tags:
        _checked(act(t), act.__name__, t)


def _prefetch_hooks(memtool, layer, tag):
    # A first layer's inputs need no gradient: torch warns that its full backward
    # hook fires on its outputs' gradients, which is the moment wanted here.
    warnings.filterwarnings("ignore", message="Full backward hook is firing when gradients are computed "
                            "with respect to module outputs")
    def resume(*_):
        _checked(memtool.resume(tag), "resume", tag)

    def pause(*_):
        _checked(memtool.pause(tag), "pause", tag)

    return [layer.register_forward_pre_hook(resume),
            layer.register_forward_hook(pause),
            layer.register_full_backward_pre_hook(resume),
            layer.register_full_backward_hook(pause)]
