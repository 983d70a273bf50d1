# The collector protocol's encodings (core/PROTOCOL.md), for scripts that play a
# collector (fake_collector.py) or write streams (tests/fuzz/make_stream_seeds.py).
import struct

PREAMBLE = b"MEMTOOL\0" + struct.pack("<I", 11)  # kProtocolVersion (core/Protocol.h)


def varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def string(s):
    return varint(len(s)) + s


def u8(v):
    return bytes([v])


# A record: its tag, then each field (bytes as they are, numbers as varints).
def record(tag, *fields):
    return tag + b"".join(f if isinstance(f, bytes) else varint(f) for f in fields)
