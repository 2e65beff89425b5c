#include "hdmlp/transforms/transform_op.h"

#include <sstream>
#include <stdexcept>

#include "hdmlp/errors.h"
#include "hdmlp/transforms/decode.h"

namespace hdmlp {

// ---- OutputShape -----------------------------------------------------------

std::vector<int64_t> OutputShape::dims() const {
  if (chw) return {channels, height, width};
  return {height, width, channels};
}

std::string OutputShape::ToString() const {
  std::ostringstream s;
  s << (type == OutputType::kFloat32 ? "float32 " : "uint8 ");
  const auto d = dims();
  s << d[0] << "x" << d[1] << "x" << d[2] << (chw ? " (CHW)" : " (HWC)");
  return s.str();
}

bool OutputShape::SameAs(const OutputShape& o) const {
  return channels == o.channels && height == o.height && width == o.width && type == o.type && chw == o.chw;
}

// ---- RandomDraw ----------------------------------------------------------------

RandomDraw& RandomDraw::Int(const std::string& name, int64_t v) {
  values.push_back(DrawValue{name, static_cast<double>(v), DrawValue::Kind::kInt, {}});
  return *this;
}

RandomDraw& RandomDraw::Bool(const std::string& name, bool v) {
  values.push_back(DrawValue{name, v ? 1.0 : 0.0, DrawValue::Kind::kBool, {}});
  return *this;
}

RandomDraw& RandomDraw::Float(const std::string& name, double v) {
  values.push_back(DrawValue{name, v, DrawValue::Kind::kFloat, {}});
  return *this;
}

RandomDraw& RandomDraw::Text(const std::string& name, const std::string& v) {
  values.push_back(DrawValue{name, 0, DrawValue::Kind::kText, v});
  return *this;
}

// ---- ChainState ----------------------------------------------------------------

void ChainState::SetExact(int h, int w, const TransformOp& op) {
  // Every sample would be this size: refused now, naming the op, rather
  // than a bare bad_alloc for the first batch.
  if (h < 1 || w < 1 || int64_t{h} * w > kMaxImagePixels) {
    op.Fail("would make every image " + std::to_string(w) + "x" + std::to_string(h) + " (w x h), outside 1.." +
            std::to_string(kMaxImagePixels) + " pixels");
  }
  known = Known::kExact;
  known_h = h;
  known_w = w;
  known_from = op.label();
}

void ChainState::SetShortSide(int s, const TransformOp& op) {
  known = Known::kShortSide;
  known_h = s;
  known_w = 0;
  known_from = op.label();
}

void ChainState::SetUnknown(const TransformOp& op) {
  known = Known::kUnknown;
  known_h = known_w = 0;
  known_from = op.label();
}

void ChainState::RequireImage(const TransformOp& op, const char* what) const {
  if (stage == Stage::kImage) return;
  op.Fail(op.name() + " after " + (stage == Stage::kFloat ? "ToTensor" : "ToUint8") +
          " is not supported: put it before (" + what + ")");
}

// ---- TransformOp -----------------------------------------------------------------

void TransformOp::Fail(const std::string& what) const { throw InvalidArgumentError(prefix_ + what); }

void TransformOp::RunImage(const OpParams&, const ImageView&, const MutableImageView&, OpScratch*) const {
  throw std::logic_error(label() + " planned no image work");
}

void TransformOp::RunTensor(const OpParams&, const TensorView&) const {
  throw std::logic_error(label() + " planned no tensor work");
}

}  // namespace hdmlp
