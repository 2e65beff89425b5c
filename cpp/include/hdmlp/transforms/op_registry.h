// The registry of transform ops: every op's name and factory, in one table
// (cpp/src/transforms/op_registry.cc). Adding an op means one new file in
// transforms/ops/ (its class: arguments, checks, output size, plan, work),
// its tests, and one line in that table.
//
// Thread-safety: the table is constant; call from any thread.
#ifndef HDMLP_TRANSFORMS_OP_REGISTRY_H_
#define HDMLP_TRANSFORMS_OP_REGISTRY_H_

#include <memory>
#include <string>
#include <vector>

#include "hdmlp/transforms/transform_op.h"

namespace hdmlp {

// Makes the op of `spec` (the `index`-th of its chain), reading and checking
// its arguments (InvalidArgumentError naming the transform).
using OpFactory = std::unique_ptr<TransformOp> (*)(const TransformSpec& spec, int index);

// The factory registered under `name`, or nullptr.
OpFactory FindOp(const std::string& name);

// Every registered op name, in the table's order.
std::vector<std::string> OpNames();

}  // namespace hdmlp

#endif  // HDMLP_TRANSFORMS_OP_REGISTRY_H_
