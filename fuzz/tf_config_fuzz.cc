// TF_CONFIG parsing and validation: any bytes give a config or an error.
#include <cstdint>
#include <string>

#include "cluster/tf_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto cfg = pstrain::ParseTfConfig(
      std::string(reinterpret_cast<const char*>(data), size));
  if (cfg.ok()) {
    (void)pstrain::ValidateForParameterServerTraining(*cfg);
    // What it parses, it writes back in a form that parses the same.
    auto again = pstrain::ParseTfConfig(cfg->ToJson());
    if (!again.ok() || again->ToJson() != cfg->ToJson()) __builtin_trap();
  }
  return 0;
}
