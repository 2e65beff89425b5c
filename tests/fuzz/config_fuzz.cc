// libFuzzer target: the config parser and validator on any text. A config
// is either loaded or refused with a ConfigError; nothing else may happen
// (no crash, no other exception, no hang: @include of a device is refused).
#include <cstddef>
#include <cstdint>
#include <string>

#include "hdmlp/config/config.h"
#include "hdmlp/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const hdmlp::Config config = hdmlp::Config::LoadString(text, "fuzz.cfg");
    (void)config.Describe();
  } catch (const hdmlp::ConfigError&) {
  }
  return 0;
}
