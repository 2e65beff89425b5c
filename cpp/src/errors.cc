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
