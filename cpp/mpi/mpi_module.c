/* One MPI ABI's side of hdmlp's MPI boundary (cpp/include/hdmlp/transport/mpi_module.h).
 *
 * Compiled once per ABI, against that ABI's header only: Open MPI's or MPICH's
 * mpi.h, or with HDMLP_MPI_STANDARD_ABI the MPI 5.0 standard ABI's mpi_abi.h.
 * It links no libmpi: its MPI symbols resolve against the libmpi the core
 * loaded (RTLD_GLOBAL) before it loads this module. Each function maps one
 * table entry onto one MPI call, on bytes (MPI_BYTE), converting handles to
 * and from the table's 64-bit form; the policy (timeouts, protocols, who
 * initialises and finalises MPI) stays in the core.
 */
#include <stdint.h>
#include <string.h>

#if defined(HDMLP_MPI_STANDARD_ABI)
#include <mpi_abi.h>
#else
#include <mpi.h>
#endif

#include "hdmlp/transport/mpi_module.h"

#define HDMLP_STR2(x) #x
#define HDMLP_STR(x) HDMLP_STR2(x)

#if defined(HDMLP_MPI_STANDARD_ABI)
#define ABI_NAME "mpiabi"
#define HEADER_NAME "MPI " HDMLP_STR(MPI_VERSION) "." HDMLP_STR(MPI_SUBVERSION) " standard ABI mpi_abi.h (ABI " \
    HDMLP_STR(MPI_ABI_VERSION) "." HDMLP_STR(MPI_ABI_SUBVERSION) ")"
#elif defined(OMPI_MAJOR_VERSION)
#define ABI_NAME "openmpi"
#define HEADER_NAME "Open MPI " HDMLP_STR(OMPI_MAJOR_VERSION) "." HDMLP_STR(OMPI_MINOR_VERSION) "." \
    HDMLP_STR(OMPI_RELEASE_VERSION) " mpi.h (MPI " HDMLP_STR(MPI_VERSION) "." HDMLP_STR(MPI_SUBVERSION) ")"
#elif defined(MPICH_VERSION)
#define ABI_NAME "mpich"
#define HEADER_NAME "MPICH " MPICH_VERSION " mpi.h (MPI " HDMLP_STR(MPI_VERSION) "." HDMLP_STR(MPI_SUBVERSION) ")"
#else
#error "mpi.h is neither Open MPI's nor MPICH's (nor an MPICH derivative's): hdmlp knows no other MPI ABI"
#endif

_Static_assert(sizeof(MPI_Comm) <= sizeof(hdmlp_mpi_handle), "MPI_Comm does not fit a handle");
_Static_assert(sizeof(MPI_Request) <= sizeof(hdmlp_mpi_handle), "MPI_Request does not fit a handle");
_Static_assert(sizeof(MPI_Message) <= sizeof(hdmlp_mpi_handle), "MPI_Message does not fit a handle");

/* Handles in 64 bits: the ABI's bytes in the first sizeof(T) bytes. */
static hdmlp_mpi_handle comm_handle(MPI_Comm comm) {
  hdmlp_mpi_handle h = 0;
  memcpy(&h, &comm, sizeof comm);
  return h;
}
static MPI_Comm comm_of(hdmlp_mpi_handle h) {
  MPI_Comm comm;
  memcpy(&comm, &h, sizeof comm);
  return comm;
}
static hdmlp_mpi_handle request_handle(MPI_Request request) {
  hdmlp_mpi_handle h = 0;
  if (request == MPI_REQUEST_NULL) return 0;
  memcpy(&h, &request, sizeof request);
  return h;
}
static MPI_Request request_of(hdmlp_mpi_handle h) {
  MPI_Request request;
  if (h == 0) return MPI_REQUEST_NULL;
  memcpy(&request, &h, sizeof request);
  return request;
}
static hdmlp_mpi_handle message_handle(MPI_Message message) {
  hdmlp_mpi_handle h = 0;
  if (message == MPI_MESSAGE_NULL) return 0;
  memcpy(&h, &message, sizeof message);
  return h;
}
static MPI_Message message_of(hdmlp_mpi_handle h) {
  MPI_Message message;
  if (h == 0) return MPI_MESSAGE_NULL;
  memcpy(&message, &h, sizeof message);
  return message;
}

static int thread_level(int level) {
  switch (level) {
    case 0: return MPI_THREAD_SINGLE;
    case 1: return MPI_THREAD_FUNNELED;
    case 2: return MPI_THREAD_SERIALIZED;
    default: return MPI_THREAD_MULTIPLE;
  }
}
static int level_number(int provided) {
  if (provided == MPI_THREAD_MULTIPLE) return 3;
  if (provided == MPI_THREAD_SERIALIZED) return 2;
  if (provided == MPI_THREAD_FUNNELED) return 1;
  return 0;
}

static void copy_text(const char* from, int length, char* text, int capacity) {
  if (capacity <= 0) return;
  if (length < 0) length = 0;
  if (length > capacity - 1) length = capacity - 1;
  memcpy(text, from, (size_t)length);
  text[length] = '\0';
}

static int m_initialized(int* flag) { return MPI_Initialized(flag); }
static int m_finalized(int* flag) { return MPI_Finalized(flag); }

static int m_init_thread(int required, int* provided) {
  int level = 0;
  const int rc = MPI_Init_thread(NULL, NULL, thread_level(required), &level);
  *provided = level_number(level);
  return rc;
}

static int m_query_thread(int* provided) {
  int level = 0;
  const int rc = MPI_Query_thread(&level);
  *provided = level_number(level);
  return rc;
}

static int m_library_version(char* text, int capacity) {
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  const int rc = MPI_Get_library_version(version, &length);
  copy_text(version, rc == MPI_SUCCESS ? length : 0, text, capacity);
  return rc;
}

static int m_error_text(int code, char* text, int capacity) {
  char message[MPI_MAX_ERROR_STRING];
  int length = 0;
  const int rc = MPI_Error_string(code, message, &length);
  copy_text(message, rc == MPI_SUCCESS ? length : 0, text, capacity);
  return rc;
}

static int m_world_rank(int* rank) { return MPI_Comm_rank(MPI_COMM_WORLD, rank); }
static int m_abort_world(int code) { return MPI_Abort(MPI_COMM_WORLD, code); }
static int m_finalize(void) { return MPI_Finalize(); }

static int m_comm_idup_world(hdmlp_mpi_handle* comm, hdmlp_mpi_handle* request) {
  MPI_Comm dup = MPI_COMM_NULL;
  MPI_Request r = MPI_REQUEST_NULL;
  const int rc = MPI_Comm_idup(MPI_COMM_WORLD, &dup, &r);
  *comm = comm_handle(dup);
  *request = request_handle(r);
  return rc;
}

static int m_comm_rank_size(hdmlp_mpi_handle comm, int* rank, int* size) {
  const int rc = MPI_Comm_rank(comm_of(comm), rank);
  return rc != MPI_SUCCESS ? rc : MPI_Comm_size(comm_of(comm), size);
}

static int m_comm_errors_return(hdmlp_mpi_handle comm) {
  return MPI_Comm_set_errhandler(comm_of(comm), MPI_ERRORS_RETURN);
}

static int m_isend(hdmlp_mpi_handle comm, int peer, int tag, const void* data, int bytes,
                   hdmlp_mpi_handle* request) {
  MPI_Request r = MPI_REQUEST_NULL;
  const int rc = MPI_Isend(data, bytes, MPI_BYTE, peer, tag, comm_of(comm), &r);
  *request = request_handle(r);
  return rc;
}

static int m_improbe(hdmlp_mpi_handle comm, int source, int tag, int* found, hdmlp_mpi_handle* message, int* from,
                     int* bytes) {
  MPI_Message m = MPI_MESSAGE_NULL;
  MPI_Status status;
  *found = 0;
  int rc = MPI_Improbe(source < 0 ? MPI_ANY_SOURCE : source, tag, comm_of(comm), found, &m, &status);
  if (rc != MPI_SUCCESS || !*found) return rc;
  *message = message_handle(m);
  *from = status.MPI_SOURCE;
  rc = MPI_Get_count(&status, MPI_BYTE, bytes);
  return rc;
}

static int m_mrecv(hdmlp_mpi_handle* message, void* data, int bytes) {
  MPI_Message m = message_of(*message);
  const int rc = MPI_Mrecv(data, bytes, MPI_BYTE, &m, MPI_STATUS_IGNORE);
  *message = message_handle(m);
  return rc;
}

static int m_test(hdmlp_mpi_handle* request, int* done) {
  MPI_Request r = request_of(*request);
  const int rc = MPI_Test(&r, done, MPI_STATUS_IGNORE);
  *request = request_handle(r);
  return rc;
}

static int m_wait(hdmlp_mpi_handle* request) {
  MPI_Request r = request_of(*request);
  const int rc = MPI_Wait(&r, MPI_STATUS_IGNORE);
  *request = request_handle(r);
  return rc;
}

static int m_cancel(hdmlp_mpi_handle* request) {
  MPI_Request r = request_of(*request);
  if (r == MPI_REQUEST_NULL) return MPI_SUCCESS;
  int rc = MPI_Cancel(&r);
  const int freed = MPI_Request_free(&r);
  *request = request_handle(r);
  return rc != MPI_SUCCESS ? rc : freed;
}

static int m_request_free(hdmlp_mpi_handle* request) {
  MPI_Request r = request_of(*request);
  if (r == MPI_REQUEST_NULL) return MPI_SUCCESS;
  const int rc = MPI_Request_free(&r);
  *request = request_handle(r);
  return rc;
}

static int m_iallgather(hdmlp_mpi_handle comm, const void* mine, int bytes, void* all, hdmlp_mpi_handle* request) {
  MPI_Request r = MPI_REQUEST_NULL;
  const int rc = MPI_Iallgather(mine, bytes, MPI_BYTE, all, bytes, MPI_BYTE, comm_of(comm), &r);
  *request = request_handle(r);
  return rc;
}

static int m_iallgatherv(hdmlp_mpi_handle comm, const void* mine, int bytes, void* all, const int* counts,
                         const int* displs, hdmlp_mpi_handle* request) {
  MPI_Request r = MPI_REQUEST_NULL;
  const int rc = MPI_Iallgatherv(mine, bytes, MPI_BYTE, all, counts, displs, MPI_BYTE, comm_of(comm), &r);
  *request = request_handle(r);
  return rc;
}

static int m_ialltoall(hdmlp_mpi_handle comm, const void* out, int bytes_each, void* in, hdmlp_mpi_handle* request) {
  MPI_Request r = MPI_REQUEST_NULL;
  const int rc = MPI_Ialltoall(out, bytes_each, MPI_BYTE, in, bytes_each, MPI_BYTE, comm_of(comm), &r);
  *request = request_handle(r);
  return rc;
}

static int m_ialltoallv(hdmlp_mpi_handle comm, const void* out, const int* out_counts, const int* out_displs,
                        void* in, const int* in_counts, const int* in_displs, hdmlp_mpi_handle* request) {
  MPI_Request r = MPI_REQUEST_NULL;
  const int rc = MPI_Ialltoallv(out, out_counts, out_displs, MPI_BYTE, in, in_counts, in_displs, MPI_BYTE,
                                comm_of(comm), &r);
  *request = request_handle(r);
  return rc;
}

static const hdmlp_mpi_module kModule = {
    HDMLP_MPI_MODULE_VERSION,
    (uint32_t)sizeof(hdmlp_mpi_module),
    ABI_NAME,
    HEADER_NAME,
    m_initialized,
    m_finalized,
    m_init_thread,
    m_query_thread,
    m_library_version,
    m_error_text,
    m_world_rank,
    m_abort_world,
    m_finalize,
    m_comm_idup_world,
    m_comm_rank_size,
    m_comm_errors_return,
    m_isend,
    m_improbe,
    m_mrecv,
    m_test,
    m_wait,
    m_cancel,
    m_request_free,
    m_iallgather,
    m_iallgatherv,
    m_ialltoall,
    m_ialltoallv,
};

__attribute__((visibility("default"))) const hdmlp_mpi_module* hdmlp_mpi_module_v1(void) { return &kModule; }
