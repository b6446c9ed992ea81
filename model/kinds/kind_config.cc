#include "model/kinds/kind_config.h"

#include "absl/strings/str_cat.h"
#include "cluster/initializer_spec.h"

namespace pstrain::model::kinds {

absl::StatusOr<std::array<int, 2>> ConfigWindow(
    const google::protobuf::RepeatedField<int64_t>& values, bool one_d, int fallback_h,
    int fallback_w) {
  if (values.empty()) return std::array<int, 2>{fallback_h, fallback_w};
  if (values.size() > (one_d ? 1 : 2)) {
    return absl::InvalidArgumentError(
        absl::StrCat("has ", values.size(),
                     " values: ", one_d ? "one" : "one or two ([height, width])", " expected"));
  }
  for (int64_t v : values) {
    if (v < 1 || v > 65536) {
      return absl::InvalidArgumentError(absl::StrCat(v, " must be in 1..65536"));
    }
  }
  if (one_d) return std::array<int, 2>{1, static_cast<int>(values[0])};
  const int h = static_cast<int>(values[0]);
  return std::array<int, 2>{h, values.size() == 2 ? static_cast<int>(values[1]) : h};
}

void SetConfigActivation(pstrain::v1::Activation a, LayerSpec* layer) {
  layer->relu = a == pstrain::v1::relu;
  if (a == pstrain::v1::ACTIVATION_UNSET || a == pstrain::v1::relu) return;
  layer->activation = *ParseActivation(pstrain::v1::Activation_Name(a));  // every name is one
}

absl::Status CheckConfigInitializers(const LayerConfigEntry& e, const LayerSpec& layer,
                                     const char* kernel_field) {
  auto kernel = ParseInitializerSpec(layer.kernel_initializer, /*allow_glorot=*/true);
  if (!kernel.ok()) return e.Bad(kernel_field, kernel.status().message());
  auto bias = ParseInitializerSpec(layer.bias_initializer);
  if (!bias.ok()) return e.Bad("bias_initializer", bias.status().message());
  return absl::OkStatus();
}

absl::Status ParsePoolConfig(const LayerConfigEntry& e, bool one_d, LayerSpec* layer) {
  const auto& p = static_cast<const pstrain::v1::PoolLayer&>(e.message());
  auto pool = ConfigWindow(p.pool_size(), one_d, one_d ? 1 : 2, 2);
  if (!pool.ok()) return e.Bad("pool_size", pool.status().message());
  auto strides = ConfigWindow(p.strides(), one_d, (*pool)[0], (*pool)[1]);
  if (!strides.ok()) return e.Bad("strides", strides.status().message());
  layer->window = *pool;
  layer->stride = *strides;
  layer->same_padding = p.padding() == pstrain::v1::same;
  return absl::OkStatus();
}

}  // namespace pstrain::model::kinds
