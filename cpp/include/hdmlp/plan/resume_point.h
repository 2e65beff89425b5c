// ResumePoint: where an access plan starts when a job resumes from a
// checkpoint instead of at epoch 0.
//
// A job's position is global: after the same step every rank has delivered
// the same global batches, so "epoch e, positions [0, position) of its
// global order delivered" describes every rank at once. Global batches are
// cut at multiples of batch_size (access_plan.h), so a position inside an
// epoch is always h * batch_size, and the plan resumes at global batch h.
//
// Changing the rank count. The boundaries of global batches do not depend on
// the world size except for the merge of a last remainder smaller than it,
// so a resumed plan keeps them. What changes is the global order itself:
//   - "uniform": the order of an epoch is a permutation keyed by (seed,
//     epoch) alone, the same for any world size; the resumed epoch's
//     remaining positions are simply cut into this plan's rank slices.
//   - "local", "partial_local": each rank reads its own shard's order, and
//     the global order of an epoch is the concatenation, batch by batch, of
//     the ranks' slices (rank 0's part of global batch h, then rank 1's,
//     ...). It depends on the world size the epoch began with,
//     `order_world_size`. The resumed epoch follows that order: its
//     remaining positions, which are exactly what the old ranks had not yet
//     read, are cut into this plan's rank slices; every later epoch is this
//     plan's own (shards re-cut for this world size).
// In both cases every sample of the interrupted epoch is read exactly once
// across the two runs (per the drop-last rule), and every remaining global
// batch holds the samples it would have held without the interruption.
//
// The one impossible case: an epoch stopped just before its last global
// batch, which holds R samples with R < the new world size (the old one did
// not merge it, the new one would have to): no rank may get an empty step,
// so AccessPlan refuses that point and names the ways out.
//
// Thread-safety: a plain value.
#ifndef HDMLP_PLAN_RESUME_POINT_H_
#define HDMLP_PLAN_RESUME_POINT_H_

#include <cstdint>

namespace hdmlp {

struct ResumePoint {
  // The first epoch the plan reads; equal to the plan's epochs: nothing is
  // left (a finished job resumed).
  int epoch = 0;
  // Positions [0, position) of `epoch`'s global order were delivered before:
  // a multiple of batch_size, before the epoch's last global batch ends.
  int64_t position = 0;
  // The world size `epoch` began with, whose global order it follows
  // (local schemes); 0: the plan's own.
  int order_world_size = 0;
};

}  // namespace hdmlp

#endif  // HDMLP_PLAN_RESUME_POINT_H_
