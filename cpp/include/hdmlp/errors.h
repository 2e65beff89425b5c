// Errors raised by the hdmlp core.
//
// The core reports failures by throwing one of these exceptions; the Python
// module maps each to the matching built-in Python exception, so a user sees
// FileNotFoundError, NotADirectoryError, ValueError or OSError with a message
// that names the file, key or argument at fault and says what to do.
// Every message must be complete on its own: it is shown as is.
#ifndef HDMLP_ERRORS_H_
#define HDMLP_ERRORS_H_

#include <stdexcept>
#include <string>

namespace hdmlp {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A path that does not exist (Python: FileNotFoundError).
class NotFoundError : public Error {
 public:
  using Error::Error;
};

// A path that should be a directory and is not (Python: NotADirectoryError).
class NotADirectoryError : public Error {
 public:
  using Error::Error;
};

// A bad argument or dataset content (Python: ValueError).
class InvalidArgumentError : public Error {
 public:
  using Error::Error;
};

// A bad configuration file or value (Python: hdmlp.ConfigError, a ValueError).
class ConfigError : public InvalidArgumentError {
 public:
  using InvalidArgumentError::InvalidArgumentError;
};

// A read or write that failed (Python: OSError).
class IOError : public Error {
 public:
  using Error::Error;
};

// The job was closed while a call was waiting (Python: RuntimeError).
class ClosedError : public Error {
 public:
  using Error::Error;
};

// An error caught on one thread, to be raised again on another. It keeps
// the type and message, not the exception object: an exception object
// shared between threads is destroyed by whichever drops it last, which
// tools like ThreadSanitizer cannot follow through the uninstrumented C++
// runtime.
class CapturedError {
 public:
  CapturedError() = default;
  // Call inside a catch block.
  static CapturedError FromCurrentException();
  explicit operator bool() const { return kind_ != Kind::kNone; }
  const std::string& message() const { return message_; }
  // An InvalidArgumentError: for a sample, a bad image rather than bad storage.
  bool IsInvalidArgument() const { return kind_ == Kind::kInvalidArgument; }
  [[noreturn]] void Throw() const;

 private:
  enum class Kind { kNone, kNotFound, kNotADirectory, kConfig, kInvalidArgument, kIO, kClosed, kOther };
  Kind kind_ = Kind::kNone;
  std::string message_;
};

}  // namespace hdmlp

#endif  // HDMLP_ERRORS_H_
