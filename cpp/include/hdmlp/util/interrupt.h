// InterruptCheck: how a long start-up phase (scanning a dataset, counting
// a rank's reads for the placement, exchanging placements) lets its caller
// stop it, e.g. on Ctrl-C.
//
// The phase calls the check between chunks of work (each a fraction of a
// second), only on the thread that started it, never on helper threads: the
// Python binding's check takes the GIL and polls PyErr_CheckSignals, which
// only the main thread may do. A check stops the phase by throwing
// InterruptedError (errors.h); the phase then joins its helper threads and
// lets the exception through. An empty check never interrupts.
#ifndef HDMLP_UTIL_INTERRUPT_H_
#define HDMLP_UTIL_INTERRUPT_H_

#include <functional>

namespace hdmlp {

using InterruptCheck = std::function<void()>;

inline void CheckInterrupt(const InterruptCheck& check) {
  if (check) check();
}

}  // namespace hdmlp

#endif  // HDMLP_UTIL_INTERRUPT_H_
