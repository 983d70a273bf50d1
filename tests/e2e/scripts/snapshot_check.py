# Reads a snapshot memtool exported (--format torch-snapshot) with torch's own
# torch.cuda._memory_viz and prints what it found, as JSON: per device index its
# alloc and free counts and bytes, the entries from events_known.py, and what
# torch's renderers made of it (EventsTest.cpp compares them with the trace).
import json
import pickle
import sys

from torch.cuda import _memory_viz as viz

with open(sys.argv[1], "rb") as f:
    data = pickle.load(f)
out = {"devices": data["memtool_devices"], "traces": []}
for entries in data["device_traces"]:
    figures = {"allocs": 0, "alloc_bytes": 0, "frees": 0, "free_bytes": 0, "known": []}
    for e in entries:
        if e["action"] == "alloc":
            figures["allocs"] += 1
            figures["alloc_bytes"] += e["size"]
        elif e["action"] == "free_completed":
            figures["frees"] += 1
            figures["free_bytes"] += e["size"]
        python = [fr for fr in e["frames"] if fr["filename"].endswith("events_known.py")]
        if python:
            figures["known"].append([e["action"], e["size"], python[0]["line"]])
    out["traces"].append(figures)
out["trace_plot"] = "snapshot.pickle" in viz.trace_plot(data)
out["segment_plot"] = "snapshot.pickle" in viz.segment_plot(data)
out["blocks"] = sum(len(seg["blocks"]) for seg in data["segments"])
out["memory_lines"] = len(viz.memory(data, format_flamegraph=lambda lines: lines).splitlines())
out["trace_text"] = viz.trace(data).splitlines()[-1]
print(json.dumps(out))
