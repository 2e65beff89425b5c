/* mpi_module.h: the C boundary between hdmlp's core and one MPI ABI.
 *
 * hdmlp's core links no MPI library. The few MPI calls it needs are compiled
 * once per MPI ABI (cpp/mpi/mpi_module.c against Open MPI's mpi.h, MPICH's
 * mpi.h, or the MPI 5.0 standard ABI's mpi_abi.h) into small shared modules,
 * hdmlp/_mpi/<abi>.so. A module does not link libmpi either: its MPI symbols
 * are resolved when the core loads it, after the core has loaded the chosen
 * libmpi with RTLD_GLOBAL (transport/mpi_fabric.h). So a module needs only its
 * ABI's header to build, on any architecture.
 *
 * This header is plain C, so that the modules need no C++ runtime and the
 * table's layout is fixed: every function of the table takes and returns C
 * types only, carries bytes (never typed data), and returns MPI's error code
 * (0 is success; error_text describes the others). Handles of communicators,
 * requests and messages are the ABI's own handles stored in 64 bits; 0 is the
 * null request or message whatever the ABI's own null value is (a request
 * that completed, was cancelled or freed reads 0 afterwards). A source or
 * peer below 0 means MPI_ANY_SOURCE. Thread levels are 0 (single) to 3
 * (multiple), as the standard orders them.
 *
 * Thread-safety: as MPI's (the core uses MPI_THREAD_MULTIPLE).
 * Versioning: the core refuses a module whose `version` differs from
 * HDMLP_MPI_MODULE_VERSION, or whose `size` is smaller than its table.
 */
#ifndef HDMLP_TRANSPORT_MPI_MODULE_H_
#define HDMLP_TRANSPORT_MPI_MODULE_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HDMLP_MPI_MODULE_VERSION 1
/* The one symbol a module exports. */
#define HDMLP_MPI_MODULE_ENTRY "hdmlp_mpi_module_v1"

typedef uint64_t hdmlp_mpi_handle;

typedef struct hdmlp_mpi_module {
  uint32_t version; /* HDMLP_MPI_MODULE_VERSION */
  uint32_t size;    /* sizeof(hdmlp_mpi_module) as the module was built */
  const char* abi;  /* "openmpi", "mpich" or "mpiabi" */
  const char* header; /* the header it was built against, e.g. "Open MPI 4.1.0 mpi.h (MPI 3.1)" */

  /* The process's MPI. */
  int (*initialized)(int* flag);
  int (*finalized)(int* flag);
  int (*init_thread)(int required, int* provided);
  int (*query_thread)(int* provided);
  int (*library_version)(char* text, int capacity);
  int (*error_text)(int code, char* text, int capacity);
  int (*world_rank)(int* rank);
  int (*abort_world)(int code);
  int (*finalize)(void);

  /* Communicators. */
  int (*comm_idup_world)(hdmlp_mpi_handle* comm, hdmlp_mpi_handle* request);
  int (*comm_rank_size)(hdmlp_mpi_handle comm, int* rank, int* size);
  int (*comm_errors_return)(hdmlp_mpi_handle comm);

  /* Point to point: bytes. improbe sets *found and, when found, the matched
   * message, its source and its size in bytes. */
  int (*isend)(hdmlp_mpi_handle comm, int peer, int tag, const void* data, int bytes, hdmlp_mpi_handle* request);
  int (*improbe)(hdmlp_mpi_handle comm, int source, int tag, int* found, hdmlp_mpi_handle* message, int* from,
                 int* bytes);
  int (*mrecv)(hdmlp_mpi_handle* message, void* data, int bytes);

  /* Requests. cancel cancels and frees; request_free lets it finish unwatched. */
  int (*test)(hdmlp_mpi_handle* request, int* done);
  int (*wait)(hdmlp_mpi_handle* request);
  int (*cancel)(hdmlp_mpi_handle* request);
  int (*request_free)(hdmlp_mpi_handle* request);

  /* Nonblocking collectives on bytes. */
  int (*iallgather)(hdmlp_mpi_handle comm, const void* mine, int bytes, void* all, hdmlp_mpi_handle* request);
  int (*iallgatherv)(hdmlp_mpi_handle comm, const void* mine, int bytes, void* all, const int* counts,
                     const int* displs, hdmlp_mpi_handle* request);
  int (*ialltoall)(hdmlp_mpi_handle comm, const void* out, int bytes_each, void* in, hdmlp_mpi_handle* request);
  int (*ialltoallv)(hdmlp_mpi_handle comm, const void* out, const int* out_counts, const int* out_displs, void* in,
                    const int* in_counts, const int* in_displs, hdmlp_mpi_handle* request);
} hdmlp_mpi_module;

typedef const hdmlp_mpi_module* (*hdmlp_mpi_module_entry)(void);

#ifdef __cplusplus
}
#endif

#endif /* HDMLP_TRANSPORT_MPI_MODULE_H_ */
