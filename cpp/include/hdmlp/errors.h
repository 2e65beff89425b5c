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

// An argument of the wrong type, reported by the Python layer of another
// rank (Python: TypeError).
class TypeError : public InvalidArgumentError {
 public:
  using InvalidArgumentError::InvalidArgumentError;
};

// One sample that cannot be held in memory: an allocation for it failed
// (Python: MemoryError). A bad sample, like an InvalidArgumentError: the
// message names the file, and on_error="skip" leaves it out.
class AllocationError : public InvalidArgumentError {
 public:
  using InvalidArgumentError::InvalidArgumentError;
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

// A job used in a process forked from the one that made it, where its
// threads do not exist (Python: RuntimeError).
class ForkedError : public ClosedError {
 public:
  using ClosedError::ClosedError;
};

// A long start-up phase saw a pending interrupt (Ctrl-C) and stopped; the
// caller re-raises the interrupt (Python: KeyboardInterrupt).
class InterruptedError : public Error {
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
  // An InvalidArgumentError: for a sample, a bad image (or one too large to
  // hold in memory) rather than bad storage.
  bool IsInvalidArgument() const { return kind_ == Kind::kInvalidArgument || kind_ == Kind::kAllocation; }
  [[noreturn]] void Throw() const;
  // A one-word name of the type, and back: to carry an error to another rank.
  std::string KindName() const;
  static CapturedError FromKindName(const std::string& kind, std::string message);

 private:
  enum class Kind { kNone, kNotFound, kNotADirectory, kConfig, kInvalidArgument, kAllocation, kIO, kClosed, kOther,
                    kType };
  Kind kind_ = Kind::kNone;
  std::string message_;
};

}  // namespace hdmlp

#endif  // HDMLP_ERRORS_H_
