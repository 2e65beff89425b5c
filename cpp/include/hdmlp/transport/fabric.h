// Fabric: how the ranks of a job exchange bytes. The one interface between
// hdmlp's core and a message-passing library, as Env is for storage.
//
// The core's transport (Communicator's start-up collectives, PeerTransport's
// requests and replies) keeps every policy: protocols, tags, deadlines, who
// starts and stops the library. A Fabric only moves bytes: nonblocking sends,
// matched probes and receives of whole messages, and nonblocking collectives,
// each completed by polling Test. Handles (a communicator, a pending
// operation, a probed message) are the library's own, carried in 64 bits; 0
// is "none" (a pending operation reads 0 once it completed, was cancelled or
// released).
//
// MpiFabric (transport/mpi_fabric.h) is the implementation: MPI loaded at run
// time, whichever ABI the site's MPI has. Another library fits the same shape
// (torch.distributed's gloo, for jobs torchrun starts: its unbound buffers
// give sends, receives from any rank and collectives; a library with no
// process-wide start answers Initialized() with true and finalises nothing).
//
// Errors: the process-wide calls and DupWorld throw IOError naming the call
// and the library's message; point-to-point calls and collectives return the
// library's error code (0: success) or, where that is all a caller can use,
// nothing, as the core treats a failed exchange by its deadline.
// Thread-safety: every method may be called from many threads at once (MPI
// runs with MPI_THREAD_MULTIPLE), except Finalize and AbortWorld, which end
// the library for the process.
#ifndef HDMLP_TRANSPORT_FABRIC_H_
#define HDMLP_TRANSPORT_FABRIC_H_

#include <cstdint>
#include <string>

namespace hdmlp {

using FabricHandle = uint64_t;

// A message found by Probe: its handle (0 when none was found), its source
// rank and its size in bytes. Receive takes it.
struct FabricMessage {
  FabricHandle handle = 0;
  int source = -1;
  int bytes = 0;
};

// What a fabric is, for messages and metrics.
struct FabricInfo {
  std::string library;  // "Open MPI v4.1.4", from the library itself
  std::string abi;      // "openmpi", "mpich", "mpiabi"
  std::string path;     // the library file loaded
  std::string why;      // why this library: "already loaded in this process", "HDMLP_MPI_LIBRARY", ...
  std::string module;   // hdmlp's module for the ABI and the header it was built against
};

class Fabric {
 public:
  static constexpr int kAnySource = -1;

  virtual ~Fabric() = default;
  virtual const FabricInfo& info() const = 0;

  // The process's library.
  virtual bool Initialized() = 0;
  virtual bool Finalized() = 0;
  // Starts the library asking for full thread support; returns the level
  // given (0 single .. 3 multiple). Throws IOError when it cannot start.
  virtual int InitThreadMultiple() = 0;
  virtual int ThreadLevel() = 0;  // of a library already started
  virtual int WorldRank() = 0;
  virtual void AbortWorld(int code) = 0;  // ends every rank of the job
  virtual void Finalize() = 0;
  // The library's text for one of its error codes.
  virtual std::string ErrorText(int code) = 0;

  // A private duplicate of the world, completed by Test(*request).
  virtual void DupWorld(FabricHandle* comm, FabricHandle* request) = 0;
  virtual void RankAndSize(FabricHandle comm, int* rank, int* size) = 0;
  // Errors on comm return codes instead of ending the process.
  virtual void ReturnErrors(FabricHandle comm) = 0;

  // Point to point; peer and source are ranks of comm.
  virtual int Send(FabricHandle comm, int peer, int tag, const void* data, int bytes, FabricHandle* request) = 0;
  // A message from source (kAnySource: any) with tag, if one has arrived.
  virtual bool Probe(FabricHandle comm, int source, int tag, FabricMessage* message) = 0;
  // Receives a probed message into data (message->bytes long).
  virtual int Receive(FabricMessage* message, void* data) = 0;

  // Pending operations.
  virtual bool Test(FabricHandle* request) = 0;  // true once complete (then *request is 0)
  virtual void Wait(FabricHandle* request) = 0;
  virtual void Cancel(FabricHandle* request) = 0;   // cancels and releases a send
  virtual void Release(FabricHandle* request) = 0;  // lets it complete unwatched

  // Nonblocking collectives on bytes.
  virtual int AllGather(FabricHandle comm, const void* mine, int bytes, void* all, FabricHandle* request) = 0;
  virtual int AllGatherV(FabricHandle comm, const void* mine, int bytes, void* all, const int* counts,
                         const int* displs, FabricHandle* request) = 0;
  virtual int AllToAll(FabricHandle comm, const void* out, int bytes_each, void* in, FabricHandle* request) = 0;
  virtual int AllToAllV(FabricHandle comm, const void* out, const int* out_counts, const int* out_displs, void* in,
                        const int* in_counts, const int* in_displs, FabricHandle* request) = 0;
};

}  // namespace hdmlp

#endif  // HDMLP_TRANSPORT_FABRIC_H_
