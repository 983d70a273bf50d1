"""IPython's and Jupyter's magics (`%load_ext memtool`).

    %%memtool [OPTIONS]      the cell, under memtool.track; its report below it
    %memtool [OPTIONS] CODE  one statement the same way
    %memtool_tensors [--device D] [--verbose]
                             the tensors this kernel holds (pytorch_memlab's table)

OPTIONS are memtool report's (--lines, --top N, --format F, --sort, --bytes,
--group-by, --site, --depth, --file, --function, --all-files, --metric) and the
track's own: -o/--trace PATH (where the trace stays; a temporary file otherwise),
--no-native, --no-python. In a notebook the report is the HTML one (an inline
frame) with the text one beside it for other front ends; in a terminal, text.
"""
import atexit
import html
import os
import re
import shutil
import sys
import tempfile

from . import _track

# memtool report's options that take a value, and those that do not.
_REPORT_VALUES = {"--top", "--sort", "--format", "--bytes", "--site", "--depth", "--group-by", "--file",
                  "--function", "--metric"}
_REPORT_FLAGS = {"--lines", "--all-files"}
_TRACK_VALUES = {"-o", "--trace"}
_TRACK_FLAGS = {"--no-native", "--no-python"}


class UsageError(ValueError):
    pass


def split_options(line):
    """(track options, report options, the code): leading words that are options
    are the magic's; the code is the rest of the line from the first word that is not."""
    words, ends = [], []
    for m in re.finditer(r"\S+", line):
        words.append(m.group())
        ends.append(m.end())
    track, report = {"native": True, "python": True, "trace": None}, []
    i = 0
    while i < len(words) and words[i].startswith("-"):
        word, value = words[i], None
        if "=" in word and word.split("=", 1)[0] in _REPORT_VALUES | _TRACK_VALUES:
            word, value = word.split("=", 1)
        if word in _REPORT_VALUES | _TRACK_VALUES and value is None:
            if i + 1 >= len(words):
                raise UsageError(f"%memtool: {word} needs a value")
            i += 1
            value = words[i]
        if word in _TRACK_VALUES:
            track["trace"] = value
        elif word == "--no-native":
            track["native"] = False
        elif word == "--no-python":
            track["python"] = False
        elif word in _REPORT_VALUES:
            report += [word, value]
        elif word in _REPORT_FLAGS:
            report.append(word)
        else:
            raise UsageError(f"%memtool: unknown option {word} (memtool report's options, -o PATH, "
                             "--no-native, --no-python)")
        i += 1
    return track, report, line[ends[i - 1]:].strip() if i else line.strip()


def _html_options(report):
    """The report options the HTML page takes (not --bytes, --lines and their kin)."""
    out, i = [], 0
    while i < len(report):
        word = report[i]
        takes_value = word in _REPORT_VALUES
        if word in ("--top", "--sort", "--site", "--depth", "--group-by", "--all-files"):
            out += report[i:i + 2] if takes_value else [word]
        i += 2 if takes_value else 1
    return out


def _in_notebook(shell):
    """A kernel a notebook talks to (ipykernel), not a terminal IPython."""
    return type(shell).__name__ == "ZMQInteractiveShell"


class _Magics:
    def __init__(self, shell):
        self.shell = shell
        self._dir = None

    def _ensure_dir(self):
        """The kernel's own directory for the cells' code and traces, gone when it exits."""
        if self._dir is None:
            self._dir = tempfile.mkdtemp(prefix="memtool-ipython-")
            atexit.register(shutil.rmtree, self._dir, True)

    def _trace_path(self, named):
        if named:
            return os.path.abspath(os.path.expanduser(named))
        self._ensure_dir()
        return os.path.join(self._dir, "trace.json")  # the last one: each cell's replaces it

    def _source_file(self, code):
        """The code, written where memtool reads the lines its reports show: a file
        named after the cell's prompt (In12.py), beside the traces."""
        self._ensure_dir()
        # The prompt's number: IPython puts the running cell last in In.
        history = self.shell.user_ns.get("In")
        count = len(history) - 1 if isinstance(history, list) else getattr(self.shell, "execution_count", 0)
        path = os.path.join(self._dir, f"In{count}.py")
        n = 1
        while os.path.exists(path):  # a second magic in one cell
            n += 1
            path = os.path.join(self._dir, f"In{count}-{n}.py")
        with open(path, "w") as f:
            f.write(code)
        return path

    def run(self, line, cell=None):
        try:
            track, report, statement = split_options(line)
        except UsageError as e:
            print(e, file=sys.stderr)
            return None
        if cell is not None and statement:
            print(f"%%memtool: {statement.split()[0]} is no option of memtool's", file=sys.stderr)
            return None
        code = cell if cell is not None else statement
        if not code.strip():
            print("%memtool: no code to run (%memtool [OPTIONS] STATEMENT, or %%memtool above a cell)",
                  file=sys.stderr)
            return None
        tracker = _track.Tracker(self._trace_path(track["trace"]), native=track["native"],
                                 python=track["python"])
        name = self._source_file(code)
        compiled = compile(code, name, "exec")
        failure = None
        with tracker:
            try:
                exec(compiled, self.shell.user_ns)
            except BaseException as e:  # the report still comes, then the error goes on
                failure = e
        self._show(tracker, report)
        self.shell.user_ns["_memtool_trace"] = tracker.trace
        if failure is not None:
            raise failure
        return None

    def _show(self, tracker, report):
        wants_format = "--format" in report
        text = tracker.report(*report)
        if not _in_notebook(self.shell) or wants_format or "--lines" in report:
            print(text, end="")
            return
        from IPython.display import display
        page = tracker.report("--format", "html", *_html_options(report))
        frame = ('<iframe style="width: 100%; height: 640px; border: 1px solid #ccc" srcdoc="'
                 + html.escape(page, quote=True) + '"></iframe>')
        display({"text/html": frame, "text/plain": text}, raw=True)

    def tensors(self, line):
        import shlex

        import memtool
        device, verbose = None, False
        words = shlex.split(line)
        i = 0
        while i < len(words):
            if words[i] == "--device" and i + 1 < len(words):
                device = words[i + 1]
                i += 2
            elif words[i] == "--verbose":
                verbose = True
                i += 1
            else:
                print(f"%memtool_tensors: unknown word {words[i]!r} (--device D, --verbose)", file=sys.stderr)
                return None
        if memtool.enabled:
            memtool.report_tensors(device=device, verbose=verbose)
        else:
            from . import _live
            print(_live.format_visible(_live.visible_tensors(device=device)), end="")
        return None


def load_ipython_extension(shell):
    magics = _Magics(shell)
    shell.register_magic_function(magics.run, magic_kind="line_cell", magic_name="memtool")
    shell.register_magic_function(magics.tensors, magic_kind="line", magic_name="memtool_tensors")
