#pragma once
// A program that touches paused memory would otherwise read zeros (CPU pages
// given back) or crash somewhere else; instead it ends with one message naming
// the region and the address, from a SIGSEGV handler installed when the first
// region memory is served. Every other fault goes on to the handler that was
// there before (the program's own, Python's faulthandler, or the default).

namespace memtool::collectors::control {

class Regions;

// Installs the handler once (later calls do nothing); `regions` answers which
// paused region holds a faulting address.
void installPausedAccessHandler(const Regions& regions);

}  // namespace memtool::collectors::control
