// ReadTextFile: the whole of a small text file (a /proc or /sys file, a
// cgroup's limit) into *out; false when it cannot be opened. For the
// machine's own files that describe limits, not for the dataset, which
// goes through Env.
//
// Thread-safety: reentrant.
#ifndef HDMLP_ENV_TEXT_FILE_H_
#define HDMLP_ENV_TEXT_FILE_H_

#include <string>

namespace hdmlp {

bool ReadTextFile(const std::string& path, std::string* out);

}  // namespace hdmlp

#endif  // HDMLP_ENV_TEXT_FILE_H_
