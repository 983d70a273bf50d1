# Plays a collector on the socket memtool run names in MEMTOOL_SOCKET (this script
# loads no torch, so the real collector never connects). The wire format is
# core/PROTOCOL.md's.
#   fifo DIR:  a module that is a FIFO in DIR, one allocation inside it, a clean end
#   endless:   a handshake-sized record that never ends, until memtool hangs up
#   orphan:    a grandchild whose parent has exited sends a stream of its own
#   wait:      prints "PID SOCKET", connects nothing, exits 0 on SIGUSR1
#   deep-reply: prints its pid once connected, answers one request (memtool ctl)
#              with JSON nested a million deep, ends its stream on SIGUSR1
import os
import signal
import socket
import struct
import sys


def varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def string(s):
    return varint(len(s)) + s


def handshake(argc):
    return (b"MEMTOOL\0" + struct.pack("<I", 4) + b"H" + varint(os.getpid()) +
            varint(os.getppid()) + varint(0) + varint(0) + varint(argc))


def connect():
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(os.environ["MEMTOOL_SOCKET"])
    return sock


# A handshake naming `name`, and an end that counts it: a stream with nothing in it.
def empty_stream(name):
    return (handshake(1) + string(name) + b"E" + varint(0) + varint(0) + varint(0) +
            varint(0) + varint(1) + varint(0) + varint(0))


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
    sock.sendall(handshake(1) + string(b"deep"))
    print(os.getpid(), flush=True)
    request = b""
    while b"Q" not in request or len(request) < request.index(b"Q") + 2:
        request += sock.recv(4096)
    request_id = request[request.index(b"Q") + 1]  # ids this small take one byte
    deep = b"[" * 1000000 + b"]" * 1000000
    sock.sendall(b"Y" + varint(request_id) + bytes([0]) + string(deep))
    signal.sigwait({signal.SIGUSR1})
    sock.sendall(b"E" + varint(0) + varint(0) + varint(0) + varint(0) + varint(2) + varint(0) +
                 varint(0))
    sys.exit(0)
if mode == "fifo":
    fifo = os.path.join(sys.argv[2], "libfifo.so")
    os.mkfifo(fifo)
    sock.sendall(handshake(1) + string(b"hostile") +
                 b"M" + varint(1) + string(fifo.encode()) + varint(0x10000) + varint(1) +
                 varint(0x10000) + varint(0x10000) +
                 b"N" + varint(0) + varint(0x10101) +
                 b"A" + bytes([0]) + varint(0x1000) + varint(100) + varint(1) + varint(0) +
                 varint(0) + varint(0) +
                 b"E" + varint(1) + varint(0) + varint(100) + varint(0) + varint(4) +
                 varint(0) + varint(0))
    sock.close()
    print("sent")
elif mode == "endless":
    # As many arguments as a handshake may have, 64 bytes each: more than a record
    # may hold. memtool must stop reading and hang up, not buffer it all.
    sock.sendall(handshake(1 << 20))
    argument = string(b"a" * 64) * 1024
    sent = 0
    try:
        while True:
            sock.sendall(argument)
            sent += len(argument)
    except (BrokenPipeError, ConnectionResetError):
        print("cut off", "after" if sent >= 64 << 20 else "before", "64 MiB")
