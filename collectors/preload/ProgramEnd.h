#pragma once
// The moment the program's own code finished: what is live then is what it
// leaked (frees after it are teardown's). One note, core::kNoteProgramEnd, says
// when; the CLI counts leaks there (docs/TRACE.md, leak_moment).
//
// - Python: an atexit hook, registered when the collector first sees the
//   interpreter, sends it as finalization begins (after the atexit hooks the
//   program registered later, before those it registered earlier).
// - C and C++: main returning, or exit() called while main runs (an atexit
//   handler registered as main starts), sends it before static destructors run.

namespace memtool::collectors {

class Engine;

namespace programEnd {

// Registers the Python hooks once. Needs the GIL; a no-op until an interpreter runs.
void tryInstallPython(Engine& engine);

// C and C++: main is about to run; `realMain`'s return sends the note.
using MainFunction = int (*)(int, char**, char**);
MainFunction wrapMain(MainFunction realMain);

}  // namespace programEnd

}  // namespace memtool::collectors
