# Writes the hand-made seeds of tests/fuzz/corpus/stream: streams with the records
# a short Python run does not send (regions, pauses, replies, notes, CUDA pools,
# frees of unknown addresses, an address allocated twice, an out-of-memory, a
# short-lived block over a live one, windows of folded events). The recorded seeds
# (c10-*.bin) are the collector's own bytes for tests/e2e/scripts/c10_ctypes.py.
# Usage: make_stream_seeds.py DIR
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e", "scripts"))
from wire import PREAMBLE, record, string, u8  # noqa: E402


def count(records, tag):
    """Events of one kind: a ShortLived record (S) is an allocation and its free; a
    Window's (B) are given beside it, as windows[record] = (allocations, frees)."""
    events = sum(r[:1] in (tag, b"S") for r in records)
    return events + sum(windows.get(r, (0, 0))[tag == b"F"] for r in records)


windows = {}


def window(allocs, frees, *fields):
    r = record(b"B", *fields)
    windows[r] = (allocs, frees)
    return r


def end(records, kind=0, status=1):
    allocs = count(records, b"A")
    frees = count(records, b"F")
    return record(b"E", allocs, frees, 0, 0, 1 + len(records), 0, kind, status)


# A fork child's stream: it continues the stack ids of its parent's (pid 4000), which
# a lone stream does not have (they read as unknown frames); shared memory; an end
# before an exec that failed, then the real end.
def fork_child():
    head = PREAMBLE + record(b"H", 4242, 4000, 1700000001, 1 | 2 | 4 | 8, 1, string(b"python3"),
                             0, 4000, 1700000000, 2, 1, 1, 1)
    before = [
        record(b"N", 2, 0x7F0000001000),
        record(b"C", string(b"/src/t.py"), string(b"worker"), 9),
        record(b"P", 1, 2, 10),
        record(b"A", u8(2), 0x7F1000000000, 3000000, 3, 2, 5, 0),
        record(b"A", u8(0), 0x1000, 64, 1, 1, 5, 0),
    ]
    after = [record(b"F", u8(2), 0x7F1000000000, 3), record(b"F", u8(0), 0x2000, 1)]
    exec_end = end(before, kind=2, status=0)
    return head + b"".join(before) + exec_end + b"".join(after) + record(
        b"E", 2, 2, 0, 0, 2 + len(before) + len(after), 0, 1, 8)


# A notice: the stream of pid 4242 that started at 1700000000 lost its descriptor.
def notice():
    return PREAMBLE + record(b"H", 4242, 1, 1700000000, 16, 0, 0) + record(
        b"W", string(b"stream.lost"), string(b"the program closed memtool's socket"))


def stream(*records):
    head = PREAMBLE + record(b"H", 4242, 1, 1700000000, 3, 2, string(b"python3"), string(b"t.py"),
                             1, string(b"RANK"), string(b"0"))
    # The end's counters are the collector's: allocations, frees, their bytes (left
    # 0: the reader does not compare them), records before End.
    allocs = count(records, b"A")
    frees = count(records, b"F")
    return head + b"".join(records) + record(b"E", allocs, frees, 0, 0, 1 + len(records), 0, 0, 1)


seeds = {
    "fork-child.bin": fork_child(),
    "notice.bin": notice(),
    "regions.bin": stream(
        record(b"C", string(b"/src/t.py"), string(b"step"), 3),
        record(b"P", 0, 1, 4),
        record(b"R", 1, string(b"weights"), u8(0), u8(2)),
        record(b"R", 2, string(b"kv"), u8(17), u8(1)),
        record(b"A", u8(0), 0x1000, 4096, 0, 1, 10, 1),
        record(b"A", u8(17), 0x7F0000000000, 1 << 21, 0, 1, 5, 2),
        record(b"X", 40, 1, u8(1), u8(2), 4096, u8(2), 1000, u8(1), string(b"ok")),
        record(b"X", 50, 2, u8(1), u8(1), 1 << 21, u8(1), 2000, u8(0), string(b"out of memory")),
        record(b"Y", 1, u8(0), string(b'{"regions": [{"tag": "weights"}]}')),
        record(b"X", 60, 1, u8(2), u8(1), 4096, u8(2), 1000, u8(1), string(b"")),
        record(b"F", u8(0), 0x1000, 7),
        record(b"W", string(b"warning"), string(b"something to know")),
    ),
    "cuda-pools.bin": stream(
        record(b"W", string(b"cuda.source"), string(b"runtime-hooks")),
        record(b"W", string(b"torch.bridge"), string(b"attached")),
        record(b"M", 1, string(b"/usr/lib/libc10_cuda.so"), 0x7F0000000000, 2,
               0x7F0000001000, 0x1000, 0x7F0000010000, 0x100),
        record(b"N", 0, 0x7F0000001234),
        record(b"N", 1, 0x7F0000010010),
        record(b"A", u8(16), 0x7F00FFFF0000, 1 << 22, 2, 0, 1, 0),
        record(b"A", u8(144), 0x7F00FFFF0000 | (1 << 61), 1 << 21, 2, 0, 1, 0),
        record(b"A", u8(80), 0x7F00FFFF0000 | (1 << 62), 1000, 1, 0, 1, 0),
        record(b"A", u8(80), 0x7F00FFFF0000 | (1 << 62), 2000, 1, 0, 1, 0),
        record(b"A", u8(1), 0x9000, 512, 0, 0, 1, 0),
        record(b"F", u8(80), 0x7F00FFFF0000 | (1 << 62), 3),
        record(b"F", u8(0), 0xDEAD, 3),
        record(b"S", u8(0), 0xA000, 256, 2, 0, 1, 0),
        record(b"S", u8(1), 0x9000, 128, 1, 0, 0, 2),
        record(b"A", u8(16), (1 << 63) | 7, 1 << 21, 0, 0, 2, 0),
        record(b"O", u8(16), 3 << 30, 2, 0, 9, u8(2), 123456789, 80 << 30),
        # A private pool (#1, a graph's) on cuda:0: its segment in graphs (224),
        # its block in graphs_active (240), keyed with bit 60 and the pool's number.
        record(b"W", string(b"cuda.graph_pool"), string(b"1 0 5 0")),
        record(b"A", u8(224), 0x7F10FFFF0000 | (1 << 61) | (1 << 60) | (1 << 47), 1 << 21, 2, 0,
               1, 0),
        record(b"A", u8(240), 0x7F10FFFF0000 | (1 << 62) | (1 << 60) | (1 << 47), 4096, 1, 0, 1, 0),
        record(b"F", u8(240), 0x7F10FFFF0000 | (1 << 62) | (1 << 60) | (1 << 47), 3),
    ),
    # Two windows (tests/core/ProtocolTest.cpp, AWindowLeavesTheReaderWhereItsEventsWould
    # says which events they stand for): the first leaves a block live after a new
    # peak; the second frees it before a peak of its own, and one from before them after.
    "windows.bin": stream(
        record(b"N", 0, 0x1000),
        record(b"N", 1, 0x2000),
        record(b"A", u8(0), 0x5000, 100, 1, 0, 3, 0),
        window(3, 2, 1000,
               1, u8(0), 3, 400, 2, 300, 400, 600, 3, 100, 200, 500, 400, 400, 200,
               2, u8(0), 2, 0, 2, 200, 300, 100, u8(0), 1, 0, 1, 200, 400, 200,
               1, 0, 0x6000, 100,
               0),
        window(1, 2, 490,
               1, u8(0), 1, 350, 0, 0, 450, 200, 3, 10, 100, 190, 450, 290, 350,
               1, u8(0), 2, 0, 1, 350, 450, 350,
               1, 0, 0x7000, 350,
               2, u8(0), 0x6000, u8(1), u8(0), 0x5000, u8(0)),
    ),
}
for name, data in seeds.items():
    with open(os.path.join(sys.argv[1], name), "wb") as f:
        f.write(data)
