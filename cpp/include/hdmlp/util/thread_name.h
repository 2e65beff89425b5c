// NameThread: gives a thread a name that `top -H`, perf and
// /proc/<pid>/task/<tid>/comm show, so that a job's CPU can be split by the
// kind of thread that spent it (benchmarks/cpu_gap.py does).
//
// The thread that started it names it, so the name is in place as soon as
// the thread exists, before it has run at all (a thread that named itself
// would show its parent's name until the scheduler ran it).
//
// Names are cut to the 15 characters Linux keeps. Elsewhere, and when the
// kernel refuses, it does nothing: a name is a label, never needed to run.
// Thread-safe: a thread is named by its starter, once.
#ifndef HDMLP_UTIL_THREAD_NAME_H_
#define HDMLP_UTIL_THREAD_NAME_H_

#include <string>
#include <thread>

#if defined(__linux__)
#include <pthread.h>
#endif

namespace hdmlp {

inline void NameThread(std::thread& thread, const std::string& name) {
#if defined(__linux__)
  pthread_setname_np(thread.native_handle(), name.substr(0, 15).c_str());
#else
  (void)thread;
  (void)name;
#endif
}

}  // namespace hdmlp

#endif  // HDMLP_UTIL_THREAD_NAME_H_
