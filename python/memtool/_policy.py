"""memtool.set_policy() and memtool.policy(): this process's memory policy, run
by memtool run (cli/policy, docs/policies.md). memtool run checks the document
whole and applies nothing of one it refuses: the error names the rule."""
import json
import os

from . import _run


def _document(policy):
    """A policy as memtool run reads it: memtool's document (a dict, its JSON
    text, or a path to a file of it), or MemLord's strategy dict, whose (low,
    high) band keys become "low-high"."""
    if isinstance(policy, (str, os.PathLike)):
        text = os.fspath(policy)
        if not text.lstrip().startswith("{"):
            with open(text) as f:
                text = f.read()
        try:
            return json.loads(text)
        except ValueError as e:
            raise ValueError(f"policy: not valid JSON: {e}") from None
    if not isinstance(policy, dict):
        raise TypeError(f"a policy is a dict, its JSON text or a file's path, not {type(policy).__name__}")
    out = {}
    for key, value in policy.items():
        if isinstance(key, tuple) and len(key) == 2:
            key = f"{key[0]}-{key[1]}"
        out[str(key)] = value
    return out


def _ask(collector, what, name):
    if collector is None:
        raise RuntimeError(f"memtool.{name} needs `memtool run` (or memtool.track)")
    try:
        return _run.ask(collector, {"op": "policy", "policy": what})["body"]
    except RuntimeError as e:
        text = str(e)
        at = text.find("policy: ")
        if at >= 0:
            raise ValueError(text[at:]) from None
        raise


def set_policy(collector, policy):
    what = "off" if policy is None else _document(policy)
    return _ask(collector, what, "set_policy")["lines"]


def policy(collector):
    return _ask(collector, "show", "policy")["policy"]
