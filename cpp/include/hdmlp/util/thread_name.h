// NameThisThread: gives the calling thread a name that `top -H`, perf and
// /proc/<pid>/task/<tid>/comm show, so that a job's CPU can be split by the
// kind of thread that spent it (benchmarks/cpu_per_image.py does).
//
// Names are cut to the 15 characters Linux keeps. Elsewhere, and when the
// kernel refuses, it does nothing: a name is a label, never needed to run.
// Thread-safe: each thread names only itself.
#ifndef HDMLP_UTIL_THREAD_NAME_H_
#define HDMLP_UTIL_THREAD_NAME_H_

#include <string>

#if defined(__linux__)
#include <pthread.h>
#endif

namespace hdmlp {

inline void NameThisThread(const std::string& name) {
#if defined(__linux__)
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
#else
  (void)name;
#endif
}

}  // namespace hdmlp

#endif  // HDMLP_UTIL_THREAD_NAME_H_
