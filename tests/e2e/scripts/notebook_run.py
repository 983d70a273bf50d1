# Executes a real notebook headless (nbclient, an ipykernel of this Python) whose cells
# use memtool's magics, and prints each code cell's outputs: their text/plain and
# whether an HTML report came with it. argv[1]: where the executed notebook is written.
import html
import re
import sys

import nbformat
from nbclient import NotebookClient

cells = [
    "import torch",
    "%load_ext memtool",
    "%%memtool --top 1 --bytes exact\nx = torch.empty(3_000_000, dtype=torch.uint8)  # line 1 of the cell\n"
    "y = torch.empty(500_000, dtype=torch.uint8)\ndel y",
    "%memtool --bytes exact --lines z = torch.empty(1_000, dtype=torch.uint8)",
    "%memtool_tensors",
]
nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
NotebookClient(nb, timeout=120, kernel_name="python3").execute()
nbformat.write(nb, sys.argv[1])
# The first report page a cell shows, as its frame holds it, for a browser to open.
for cell in nb.cells:
    for out in cell.get("outputs", []):
        frame = out.get("data", {}).get("text/html", "")
        m = re.search(r'srcdoc="([^"]*)"', frame)
        if m and not any(name.endswith(".cell.html") for name in sys.argv[2:3]):
            with open(sys.argv[1] + ".cell.html", "w") as f:
                f.write(html.unescape(m.group(1)))
            sys.argv.append("written.cell.html")
for i, cell in enumerate(nb.cells):
    for out in cell.get("outputs", []):
        data = out.get("data", {})
        text = out.get("text") or data.get("text/plain", "")
        html = "text/html" in data and "<iframe" in data["text/html"] and "srcdoc=" in data["text/html"]
        print(f"--- cell {i} {out['output_type']}{' html' if html else ''}")
        print(text, end="" if text.endswith("\n") else "\n")
