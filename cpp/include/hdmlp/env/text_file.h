// ReadTextFile: the whole of a small text file (a /proc or /sys file, a
// cgroup's limit) into *out; false when it cannot be opened. For the
// machine's own files that describe limits, not for the dataset, which
// goes through Env. SplitText cuts such a file's text at `sep` (lines,
// comma-separated lists), keeping empty fields.
//
// Thread-safety: reentrant.
#ifndef HDMLP_ENV_TEXT_FILE_H_
#define HDMLP_ENV_TEXT_FILE_H_

#include <string>
#include <vector>

namespace hdmlp {

bool ReadTextFile(const std::string& path, std::string* out);
std::vector<std::string> SplitText(const std::string& text, char sep);

}  // namespace hdmlp

#endif  // HDMLP_ENV_TEXT_FILE_H_
