#include "model/device.h"

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace pstrain::model {

std::string Device::ToString() const {
  switch (kind) {
    case Kind::kAuto:
      return "auto";
    case Kind::kCpu:
      return "cpu";
    case Kind::kCuda:
      return index == 0 ? "cuda" : absl::StrCat("cuda:", index);
  }
  return "auto";
}

absl::StatusOr<Device> ParseDevice(absl::string_view text) {
  const absl::string_view whole = text;
  if (text == "auto") return Device::Auto();
  if (text == "cpu") return Device::Cpu();
  if (text == "cuda") return Device::Cuda(0);
  int index = -1;
  if (absl::ConsumePrefix(&text, "cuda:") && absl::SimpleAtoi(text, &index) && index >= 0 &&
      index < 64) {
    return Device::Cuda(index);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("device \"", whole, "\" is not auto, cpu, cuda or cuda:N (N in 0..63)"));
}

}  // namespace pstrain::model
