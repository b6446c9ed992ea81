// Model config files (protobuf text format, then our checks).
#include <cstdint>
#include <string>

#include "model/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)pstrain::model::ParseModelConfigFile(
      std::string(reinterpret_cast<const char*>(data), size), "fuzz.pbtxt");
  return 0;
}
