#pragma once
// A program that touches paused memory would otherwise read zeros (CPU pages
// given back) or crash somewhere else; instead it ends with one message naming
// the region and the address, from a SIGSEGV handler installed when the first
// region memory is served. Every other fault goes on to the handler that was
// there before (the program's own, Python's faulthandler, or the default).
//
// Except while `memtool ctl` holds the program yielded: then a thread that
// touches memory it may not (one that was inside an op, the GIL released, when
// the program was parked) waits in the handler until restore, and its access is
// made again. A yield the program asked for itself (yield_memory) does not hold:
// the thread that would restore could be the one waiting.

#include <cstdint>

namespace memtool::collectors::control {

class Regions;

// Installs the handler once (later calls do nothing); `regions` answers which
// paused region holds a faulting address.
void installPausedAccessHandler(const Regions& regions);

// From true until false, faults on inaccessible memory wait (see above); false
// lets the waiting threads go on. Returns, at false, how many threads waited.
uint32_t holdFaultsWhileYielded(bool hold);
// The threads that have come to wait since the hold began.
uint32_t threadsHeld();
// Those waiting now: threadsHeld() while the hold lasts, else 0.
uint32_t threadsWaiting();

}  // namespace memtool::collectors::control
