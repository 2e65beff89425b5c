#include "hdmlp/transforms/op_args.h"

#include <cmath>
#include <sstream>

#include "hdmlp/errors.h"
#include "hdmlp/transforms/decode.h"

namespace hdmlp {

std::string FormatNumber(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

std::string FormatList(const std::vector<double>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + FormatNumber(v[i]);
  return out + "]";
}

OpArgs::OpArgs(const TransformSpec& spec, int index, std::initializer_list<const char*> allowed)
    : spec_(spec), op_(spec.op), index_(index), prefix_("transform " + std::to_string(index) + " (" + spec.op + "): ") {
  for (const auto& [name, value] : spec.args) {
    bool ok = false;
    for (const char* a : allowed) ok = ok || name == a;
    if (ok) continue;
    std::string names;
    for (const char* a : allowed) names += std::string(names.empty() ? "" : ", ") + a;
    Fail(spec.op + " has no argument '" + name + "'" +
         (allowed.size() ? " (its arguments: " + names + ")" : " (it takes none)"));
  }
}

void OpArgs::Fail(const std::string& what) const { throw InvalidArgumentError(prefix_ + what); }

const std::vector<double>* OpArgs::Get(const char* name) const {
  auto it = spec_.args.find(name);
  return it == spec_.args.end() ? nullptr : &it->second;
}

double OpArgs::Scalar(const char* name, double def) const {
  const auto* v = Get(name);
  if (!v) return def;
  if (v->size() != 1 || !std::isfinite((*v)[0])) Fail(std::string(name) + " must be one number, got " + FormatList(*v));
  return (*v)[0];
}

bool OpArgs::Flag(const char* name, bool def) const {
  const double v = Scalar(name, def ? 1 : 0);
  if (v != 0 && v != 1) Fail(std::string(name) + " must be 0 or 1 (false or true), got " + FormatNumber(v));
  return v == 1;
}

int OpArgs::Int(const char* name, int def, int lo, int hi) const {
  const double v = Scalar(name, def);
  if (v != std::floor(v) || v < lo || v > hi) {
    Fail(std::string(name) + " must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
         FormatNumber(v));
  }
  return static_cast<int>(v);
}

double OpArgs::Probability(double def) const {
  const double p = Scalar("p", def);
  if (!(p >= 0 && p <= 1)) Fail("p must be a probability in [0, 1], got " + FormatNumber(p));
  return p;
}

void OpArgs::Size(int* height, int* width, bool* single) const {
  const auto* v = Get("size");
  if (!v) Fail("size is required");
  bool ok = v->size() == 1 || v->size() == 2;
  for (double x : *v) ok = ok && std::isfinite(x) && x == std::floor(x) && x >= 1 && x <= (1 << 20);
  if (!ok) {
    Fail("size must be a positive integer or a pair (h, w) of positive integers (at most 1048576), got " +
         FormatList(*v));
  }
  *single = v->size() == 1;
  *height = static_cast<int>((*v)[0]);
  *width = *single ? *height : static_cast<int>((*v)[1]);
  if (int64_t{*height} * *width > kMaxImagePixels) {
    Fail("size " + FormatList(*v) + " gives more than " + std::to_string(kMaxImagePixels) + " pixels");
  }
}

Interpolation OpArgs::Interp(Interpolation def, std::initializer_list<Interpolation> allowed) const {
  const double v = Scalar("interpolation", static_cast<int>(def));
  if (v != std::floor(v) || v < 0 || v > 5) {
    Fail("interpolation must be a PIL filter code (0 nearest, 1 lanczos, 2 bilinear, 3 bicubic, 4 box, "
         "5 hamming), got " + FormatNumber(v));
  }
  const auto mode = static_cast<Interpolation>(static_cast<int>(v));
  if (allowed.size() == 0) return mode;
  std::string names;
  for (Interpolation a : allowed) {
    if (a == mode) return mode;
    names += std::string(names.empty() ? "" : ", ") + InterpolationName(a);
  }
  Fail(std::string("interpolation ") + InterpolationName(mode) + " is not supported here (PIL's transforms take " +
       names + ")");
}

void OpArgs::Range(const char* name, double lo, double hi, double* out) const {
  const auto* v = Get(name);
  if (!v) {
    out[0] = lo;
    out[1] = hi;
    return;
  }
  if (v->size() != 2 || !std::isfinite((*v)[0]) || !std::isfinite((*v)[1])) {
    Fail(std::string(name) + " must be a pair (min, max), got " + FormatList(*v));
  }
  if (!((*v)[0] > 0)) Fail(std::string(name) + " must be positive, got " + FormatList(*v));
  if ((*v)[0] > (*v)[1]) Fail(std::string(name) + " must be (min, max) with min <= max, got " + FormatList(*v));
  out[0] = (*v)[0];
  out[1] = (*v)[1];
}

void OpArgs::Interval(const char* name, double lo, double hi, const double def[2], double* out) const {
  const auto* v = Get(name);
  if (!v) {
    out[0] = def[0];
    out[1] = def[1];
    return;
  }
  if (v->size() != 2 || !std::isfinite((*v)[0]) || !std::isfinite((*v)[1])) {
    Fail(std::string(name) + " must be a pair (min, max), got " + FormatList(*v));
  }
  if ((*v)[0] > (*v)[1]) Fail(std::string(name) + " must be (min, max) with min <= max, got " + FormatList(*v));
  if ((*v)[0] < lo || (*v)[1] > hi) {
    Fail(std::string(name) + " must lie in [" + FormatNumber(lo) + ", " + FormatNumber(hi) + "], got " +
         FormatList(*v));
  }
  out[0] = (*v)[0];
  out[1] = (*v)[1];
}

void OpArgs::Fill(const char* name, uint8_t rgb[3], int* count) const {
  const auto* v = Get(name);
  if (!v) {
    rgb[0] = rgb[1] = rgb[2] = 0;
    *count = 1;
    return;
  }
  if (v->size() != 1 && v->size() != 3) {
    Fail(std::string(name) + " must be one number or one per channel (R, G, B), got " + FormatList(*v));
  }
  for (size_t c = 0; c < 3; ++c) {
    const double x = (*v)[v->size() == 1 ? 0 : c];
    const double t = std::isfinite(x) ? std::trunc(x) : -1;  // PIL: int(x)
    if (!(t >= 0 && t <= 255)) {
      Fail(std::string(name) + " values must be 8-bit levels in [0, 255], got " + FormatList(*v));
    }
    rgb[c] = static_cast<uint8_t>(t);
  }
  *count = static_cast<int>(v->size());
}

bool OpArgs::Point(const char* name, double out[2]) const {
  const auto* v = Get(name);
  if (!v) return false;
  if (v->size() != 2 || !std::isfinite((*v)[0]) || !std::isfinite((*v)[1])) {
    Fail(std::string(name) + " must be a pair (x, y), got " + FormatList(*v));
  }
  out[0] = (*v)[0];
  out[1] = (*v)[1];
  return true;
}

}  // namespace hdmlp
