// OpArgs: reads and checks the arguments of one transform spec.
//
// A TransformSpec carries each argument as a list of numbers (what the Python
// classes in hdmlp.transforms produce). An op's constructor reads its own
// arguments through OpArgs, which refuses unknown argument names and every
// malformed value with an InvalidArgumentError whose message starts with
// "transform <i> (<op>): ", so the user sees which transform is at fault.
// Defaults are the caller's (torchvision's).
//
// Thread-safety: a plain helper used while a pipeline is built; not shared.
#ifndef HDMLP_TRANSFORMS_OP_ARGS_H_
#define HDMLP_TRANSFORMS_OP_ARGS_H_

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "hdmlp/transforms/resample.h"

namespace hdmlp {

// One op of a chain as the user gave it: its name and arguments.
struct TransformSpec {
  std::string op;
  std::map<std::string, std::vector<double>> args;
};

// "1.5", "224": a number as error messages show it.
std::string FormatNumber(double v);
// "[0.5, 2]".
std::string FormatList(const std::vector<double>& v);

class OpArgs {
 public:
  // Refuses any argument of `spec` not in `allowed`. `index` is the op's
  // position in the chain (0-based), as error messages name it.
  OpArgs(const TransformSpec& spec, int index, std::initializer_list<const char*> allowed);

  const std::string& op() const { return op_; }
  int index() const { return index_; }
  // "transform 2 (CenterCrop): ".
  const std::string& prefix() const { return prefix_; }

  [[noreturn]] void Fail(const std::string& what) const;

  // The raw values of an argument, or nullptr when it was not given.
  const std::vector<double>* Get(const char* name) const;

  // One finite number.
  double Scalar(const char* name, double def) const;
  // 0 or 1.
  bool Flag(const char* name, bool def) const;
  // An integer in [lo, hi].
  int Int(const char* name, int def, int lo, int hi) const;
  // A probability in [0, 1] (argument "p").
  double Probability(double def = 0.5) const;

  // size: [s] (single) or [h, w]; positive integers, at most kMaxImagePixels
  // pixels. Required.
  void Size(int* height, int* width, bool* single) const;
  // A PIL filter code (0..5); `allowed` limits it (empty: all six).
  Interpolation Interp(Interpolation def = Interpolation::kBilinear,
                       std::initializer_list<Interpolation> allowed = {}) const;
  // A pair (min, max) with 0 < min <= max; (lo, hi) when not given.
  void Range(const char* name, double lo, double hi, double* out) const;
  // A pair (min, max) with min <= max inside [lo, hi]; out = def when not given.
  void Interval(const char* name, double lo, double hi, const double def[2], double* out) const;
  // A fill colour for 8-bit pixels: one value (all channels) or one per
  // channel (R, G, B), each truncated to an integer as PIL does and in
  // 0..255. Returned in R, G, B order.
  void Fill(const char* name, uint8_t rgb[3], int* count) const;
  // A point (x, y) of finite numbers; false (out untouched) when not given.
  bool Point(const char* name, double out[2]) const;

 private:
  const TransformSpec& spec_;
  std::string op_;
  int index_;
  std::string prefix_;
};

}  // namespace hdmlp

#endif  // HDMLP_TRANSFORMS_OP_ARGS_H_
