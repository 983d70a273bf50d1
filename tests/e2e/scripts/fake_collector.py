# Plays a collector on the socket memtool run names in MEMTOOL_SOCKET (this script
# loads no torch, so the real collector never connects). The wire format is
# core/PROTOCOL.md's.
#   fifo DIR:  a module that is a FIFO in DIR, one allocation inside it, a clean end
#   endless:   a handshake-sized record that never ends, until memtool hangs up
#   orphan:    a grandchild whose parent has exited sends a stream of its own
#   wait:      prints "PID SOCKET", connects nothing, exits 0 on SIGUSR1
#   deep-reply: prints its pid once connected, answers one request (memtool ctl)
#              with JSON nested a million deep, ends its stream on SIGUSR1
#   reply BODY...: prints its pid once connected, answers the Nth request with the
#              Nth BODY as it is (status ok), ends its stream on SIGUSR1
#   die-on-request: prints its pid once connected, and at the first request ends
#              by SIGKILL, unanswered
#   impostor PID BODY...: as reply, but its handshake announces PID as its own
import os
import signal
import socket
import sys

from wire import PREAMBLE, record, string, u8, varint


def handshake_head(argc, pid=None):
    return PREAMBLE + record(b"H", pid or os.getpid(), os.getppid(), 0, 0, argc)


# A whole handshake: its arguments, and no launcher variables; `pid`: the pid it
# announces (its own unless said).
def handshake(*args, pid=None):
    return handshake_head(len(args), pid) + b"".join(string(a) for a in args) + varint(0)


def connect():
    # As a collector does: nothing is sent before memtool run's admission byte
    # (it checks that this process descends from the run while it still lives).
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(os.environ["MEMTOOL_SOCKET"])
    if len(sock.recv(1)) != 1:
        sys.exit("memtool run did not admit this process")
    return sock


# A handshake naming `name`, and an end that counts it: a stream with nothing in it.
def empty_stream(name):
    return handshake(name) + record(b"E", 0, 0, 0, 0, 1, 0, 0, 0)


mode = sys.argv[1]
if mode == "wait":
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    print(os.getpid(), os.environ["MEMTOOL_SOCKET"], flush=True)
    signal.sigwait({signal.SIGUSR1})
    sys.exit(0)
if mode == "orphan":
    go_r, go_w = os.pipe()
    done_r, done_w = os.pipe()
    middle = os.fork()
    if middle == 0:
        if os.fork() == 0:
            os.close(go_w)
            os.close(done_r)
            os.read(go_r, 1)  # its parent is gone: memtool, the subreaper, adopted it
            sock = connect()
            sock.sendall(empty_stream(b"orphan"))
            sock.close()
            os._exit(0)  # done_w closes with it
        os._exit(0)
    os.close(done_w)
    os.waitpid(middle, 0)
    os.write(go_w, b"x")
    os.read(done_r, 1)  # end of file: the grandchild has sent all and exited
    print("orphan sent")
    sys.exit(0)
sock = connect()
if mode == "deep-reply":
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    sock.sendall(handshake(b"deep"))
    print(os.getpid(), flush=True)
    request = b""
    while b"Q" not in request or len(request) < request.index(b"Q") + 2:
        request += sock.recv(4096)
    request_id = request[request.index(b"Q") + 1]  # ids this small take one byte
    deep = b"[" * 1000000 + b"]" * 1000000
    sock.sendall(record(b"Y", request_id, u8(0), string(deep)))
    signal.sigwait({signal.SIGUSR1})
    sock.sendall(record(b"E", 0, 0, 0, 0, 2, 0, 0, 0))
    sys.exit(0)
if mode in ("reply", "die-on-request", "impostor"):
    # Requests are read whole, one by one, as core/PROTOCOL.md frames them.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    claimed = int(sys.argv[2]) if mode == "impostor" else None
    sock.sendall(handshake(mode.encode(), pid=claimed))
    print(os.getpid(), flush=True)
    pending = b""
    answers = [a.encode() for a in sys.argv[3 if claimed else 2:]]

    def read_varint(data, at):
        value, shift = 0, 0
        while True:
            if at >= len(data):
                return None, at
            b = data[at]
            at += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return value, at

    def one_request(data):  # (request id, bytes used), or None while incomplete
        if not data.startswith(b"Q"):
            return None
        request_id, at = read_varint(data, 1)
        argc, at = read_varint(data, at) if request_id is not None else (None, at)
        if argc is None:
            return None
        for _ in range(argc):
            length, at = read_varint(data, at)
            if length is None or at + length > len(data):
                return None
            at += length
        return request_id, at

    sent = 1  # the handshake; the end record counts the replies too
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            sys.exit(0)
        pending += chunk
        while (found := one_request(pending)) is not None:
            request_id, used = found
            pending = pending[used:]
            if mode == "die-on-request":
                os.kill(os.getpid(), signal.SIGKILL)
            body = answers.pop(0) if answers else b'{"error":"no more answers"}'
            sock.sendall(record(b"Y", request_id, u8(0), string(body)))
            sent += 1
            if not answers:
                signal.sigwait({signal.SIGUSR1})
                sock.sendall(record(b"E", 0, 0, 0, 0, sent, 0, 0, 0))
                sys.exit(0)
if mode == "fifo":
    fifo = os.path.join(sys.argv[2], "libfifo.so")
    os.mkfifo(fifo)
    sock.sendall(handshake(b"hostile") +
                 record(b"M", 1, string(fifo.encode()), 0x10000, 1, 0x10000, 0x10000) +
                 record(b"N", 0, 0x10101) +
                 record(b"A", u8(0), 0x1000, 100, 1, 0, 0, 0) +
                 record(b"E", 1, 0, 100, 0, 4, 0, 0, 0))
    sock.close()
    print("sent")
elif mode == "endless":
    # As many arguments as a handshake may have, 64 bytes each: more than a record
    # may hold. memtool must stop reading and hang up, not buffer it all.
    sock.sendall(handshake_head(1 << 20))
    argument = string(b"a" * 64) * 1024
    sent = 0
    try:
        while True:
            sock.sendall(argument)
            sent += len(argument)
    except (BrokenPipeError, ConnectionResetError):
        print("cut off", "after" if sent >= 64 << 20 else "before", "64 MiB")
