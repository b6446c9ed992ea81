// Where a replica computes (--device): "auto" (CUDA when a device is
// usable, else the CPU), "cpu", "cuda" (device 0) or "cuda:N". Parsed once
// from the flags; plain data.
#ifndef PSTRAIN_MODEL_DEVICE_H_
#define PSTRAIN_MODEL_DEVICE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pstrain::model {

struct Device {
  enum class Kind { kAuto, kCpu, kCuda };
  Kind kind = Kind::kAuto;
  int index = 0;  // kCuda: which CUDA device

  static Device Auto() { return {Kind::kAuto, 0}; }
  static Device Cpu() { return {Kind::kCpu, 0}; }
  static Device Cuda(int index = 0) { return {Kind::kCuda, index}; }

  // "auto", "cpu", "cuda" (device 0) or "cuda:N".
  std::string ToString() const;
  bool operator==(const Device& o) const { return kind == o.kind && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
};

// InvalidArgument naming the text for anything but the forms above (N a
// device number in 0..63).
absl::StatusOr<Device> ParseDevice(absl::string_view text);

}  // namespace pstrain::model

#endif  // PSTRAIN_MODEL_DEVICE_H_
