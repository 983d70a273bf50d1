"""Asking `memtool run` (the CLI that profiles this process) about this process.

memtool run listens for `memtool ctl` on a socket in the user's control
directory and tells the program its path (MEMTOOL_CONTROL_SOCKET). A request is
one JSON line, the answer one JSON line. The collector's buffered records are
sent first, so that the answer covers everything the program did until now:
memtool run reads them from the stream before it answers.
"""
import json
import os
import socket

_TIMEOUT_S = 600


def ask(collector, request):
    """The answer to `request` (a dict with "op"), as a dict. Raises RuntimeError
    when memtool run cannot be reached or refuses."""
    path = os.environ.get("MEMTOOL_CONTROL_SOCKET")
    if not path:
        raise RuntimeError("memtool run did not give this process its control socket "
                           "(MEMTOOL_CONTROL_SOCKET is not set)")
    collector.flush()
    request = dict(request, pid=os.getpid(), flushed=True)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(_TIMEOUT_S)
        try:
            s.connect(path)
            s.sendall(json.dumps(request, separators=(",", ":")).encode() + b"\n")
            chunks = []
            while True:
                chunk = s.recv(1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
                if chunk.endswith(b"\n"):
                    break
        except OSError as e:
            raise RuntimeError(f"memtool run cannot be reached at {path}: {e}") from None
    if not chunks:
        raise RuntimeError("memtool run closed the connection without an answer")
    answer = json.loads(b"".join(chunks).decode("utf-8", "replace"))
    if answer.get("status") != "ok":
        raise RuntimeError(f"memtool run: {answer.get('error') or answer.get('status')}")
    return answer
