# Plays a collector that sends what no collector sends, on the socket memtool run
# names in MEMTOOL_SOCKET (this script loads no torch, so the real collector never
# connects). The wire format is core/PROTOCOL.md's.
#   fifo DIR:  a module that is a FIFO in DIR, one allocation inside it, a clean end
#   endless:   a handshake-sized record that never ends, until memtool hangs up
import os
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


sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.connect(os.environ["MEMTOOL_SOCKET"])
mode = sys.argv[1]
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
