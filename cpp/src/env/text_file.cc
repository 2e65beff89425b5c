#include "hdmlp/env/text_file.h"

#include <fstream>
#include <sstream>

namespace hdmlp {

bool ReadTextFile(const std::string& path, std::string* out) {
  std::ifstream in(path);
  if (!in) return false;
  std::ostringstream s;
  s << in.rdbuf();
  *out = s.str();
  return true;
}

}  // namespace hdmlp
