#include "hdmlp/errors.h"

namespace hdmlp {

CapturedError CapturedError::FromCurrentException() {
  CapturedError c;
  try {
    throw;
  } catch (const NotFoundError& e) {
    c.kind_ = Kind::kNotFound, c.message_ = e.what();
  } catch (const NotADirectoryError& e) {
    c.kind_ = Kind::kNotADirectory, c.message_ = e.what();
  } catch (const ConfigError& e) {
    c.kind_ = Kind::kConfig, c.message_ = e.what();
  } catch (const AllocationError& e) {
    c.kind_ = Kind::kAllocation, c.message_ = e.what();
  } catch (const TypeError& e) {
    c.kind_ = Kind::kType, c.message_ = e.what();
  } catch (const InvalidArgumentError& e) {
    c.kind_ = Kind::kInvalidArgument, c.message_ = e.what();
  } catch (const IOError& e) {
    c.kind_ = Kind::kIO, c.message_ = e.what();
  } catch (const ClosedError& e) {
    c.kind_ = Kind::kClosed, c.message_ = e.what();
  } catch (const std::exception& e) {
    c.kind_ = Kind::kOther, c.message_ = e.what();
  } catch (...) {
    c.kind_ = Kind::kOther, c.message_ = "unknown error";
  }
  return c;
}

void CapturedError::Throw() const {
  switch (kind_) {
    case Kind::kNotFound:
      throw NotFoundError(message_);
    case Kind::kNotADirectory:
      throw NotADirectoryError(message_);
    case Kind::kConfig:
      throw ConfigError(message_);
    case Kind::kInvalidArgument:
      throw InvalidArgumentError(message_);
    case Kind::kAllocation:
      throw AllocationError(message_);
    case Kind::kType:
      throw TypeError(message_);
    case Kind::kIO:
      throw IOError(message_);
    case Kind::kClosed:
      throw ClosedError(message_);
    case Kind::kOther:
    case Kind::kNone:
      break;
  }
  throw Error(message_);
}

}  // namespace hdmlp

namespace hdmlp {
namespace {

constexpr struct {
  const char* name;
  int kind;
} kKindNames[] = {{"none", 0}, {"not_found", 1}, {"not_a_directory", 2}, {"config", 3},
                  {"invalid_argument", 4}, {"allocation", 5}, {"io", 6}, {"closed", 7}, {"other", 8},
                  {"type", 9}};

}  // namespace

std::string CapturedError::KindName() const {
  for (const auto& k : kKindNames) {
    if (k.kind == static_cast<int>(kind_)) return k.name;
  }
  return "other";
}

CapturedError CapturedError::FromKindName(const std::string& kind, std::string message) {
  CapturedError c;
  c.kind_ = Kind::kOther;
  for (const auto& k : kKindNames) {
    if (kind == k.name && k.kind != 0) c.kind_ = static_cast<Kind>(k.kind);
  }
  c.message_ = std::move(message);
  return c;
}

}  // namespace hdmlp
