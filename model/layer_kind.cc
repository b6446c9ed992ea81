#include "model/layer_kind.h"

#include <cstdio>
#include <cstdlib>
#include <map>

#include "absl/strings/str_cat.h"

namespace pstrain::model {
namespace {

// By kind, in LayerKind order; written only before main() (static
// registration), read after.
std::map<int, const LayerKindDef*>& Registry() {
  static auto* registry = new std::map<int, const LayerKindDef*>();
  return *registry;
}

}  // namespace

bool RegisterLayerKind(const LayerKindDef* def) {
  if (!Registry().emplace(static_cast<int>(def->kind()), def).second) {
    std::fprintf(stderr, "layer kind %s is defined twice\n", def->name());
    std::abort();
  }
  return true;
}

const LayerKindDef& KindDef(LayerKind kind) {
  auto it = Registry().find(static_cast<int>(kind));
  if (it == Registry().end()) {
    std::fprintf(stderr, "layer kind %d has no definition (model/kinds/)\n",
                 static_cast<int>(kind));
    std::abort();
  }
  return *it->second;
}

const LayerKindDef* FindKindDef(std::string_view name) {
  for (const auto& [kind, def] : Registry()) {
    if (name == def->name()) return def;
  }
  return nullptr;
}

std::vector<const LayerKindDef*> AllKindDefs() {
  std::vector<const LayerKindDef*> out;
  for (const auto& [kind, def] : Registry()) out.push_back(def);
  return out;
}

absl::Status LayerKindDef::DescribeCuda(const LayerSpec& spec, const Shape& in,
                                        PstrainCudaLayer* layer) const {
  return absl::UnimplementedError(name());
}

namespace kinds {

absl::Status NeedRank(const LayerSpec& spec, const Shape& in, size_t rank, const char* form) {
  if (in.size() == rank) return absl::OkStatus();
  std::string hint;
  if (spec.kind == LayerKind::kDense) {
    hint = ": put flatten or global_average_pool1d before it";
  } else if (in.size() == 1 && spec.kind != LayerKind::kGlobalAveragePool1D) {
    hint = ": give the model an input_shape (e.g. input_shape: [28, 28, 1])";
  }
  return absl::InvalidArgumentError(absl::StrCat(LayerKindName(spec.kind), " needs a ", form,
                                                 " input but its input is ", ShapeString(in),
                                                 hint));
}

absl::Status CheckKernelSize(const LayerSpec& spec, const Shape& kernel) {
  // Kernels are held whole in each worker's flat parameter array.
  constexpr double kMaxKernelValues = 2147483648.0;  // 2^31
  double values = 1;
  for (int64_t d : kernel) values *= static_cast<double>(d);
  if (values <= kMaxKernelValues) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(LayerKindName(spec.kind), " kernel of ", values, " values is larger than 2^31"));
}

absl::Status CheckLayerActivation(const LayerSpec& spec, bool softmax) {
  const char* kind = LayerKindName(spec.kind);
  if (spec.relu && spec.activation != Activation::kLinear) {
    return absl::InvalidArgumentError(
        absl::StrCat(kind, " has both relu and ", ActivationName(spec.activation)));
  }
  if (!softmax && spec.activation == Activation::kSoftmax) {
    return absl::InvalidArgumentError(absl::StrCat(kind, " activation ", kSoftmaxOnlyLast));
  }
  return absl::OkStatus();
}

absl::Status CudaKernelLayer(const LayerSpec& spec) {
  if (!spec.use_bias) return absl::UnimplementedError("a layer without a bias");
  if (spec.activation != Activation::kLinear) {
    return absl::UnimplementedError(absl::StrCat("activation ", ActivationName(spec.activation)));
  }
  return absl::OkStatus();
}

std::vector<LayerVariable> KernelAndBias(const LayerSpec& spec, const char* kernel_suffix,
                                         Shape kernel, int64_t bias) {
  std::vector<LayerVariable> out;
  out.push_back(
      {kernel_suffix, std::move(kernel), ParamRole::kKernel, LayerVariable::Init::kKernel});
  if (spec.use_bias) {
    out.push_back({"bias", Shape{bias}, ParamRole::kBias, LayerVariable::Init::kBias});
  }
  return out;
}

namespace {

// Outputs along one axis of `in` steps for a window of `k` moved by `s`.
int64_t OutLength(int64_t in, int k, int s, bool same) {
  if (same) return (in + s - 1) / s;
  return in < k ? 0 : (in - k) / s + 1;
}

}  // namespace

absl::StatusOr<Shape> WindowOutputShape(const LayerSpec& spec, const Shape& in, bool one_d,
                                        int64_t channels) {
  const char* kind = LayerKindName(spec.kind);
  const bool conv = spec.has_kernel();
  const char* what = conv ? "kernel" : "pool";
  for (int a = one_d ? 1 : 0; a < 2; ++a) {
    if (spec.window[a] < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(kind, " ", what, " size ", spec.window[a], " must be at least 1"));
    }
    if (spec.stride[a] < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(kind, " stride ", spec.stride[a], " must be at least 1"));
    }
  }
  const int64_t h = one_d ? 1 : in[0], w = one_d ? in[0] : in[1];
  const int64_t oh = OutLength(h, spec.window[0], spec.stride[0], spec.same_padding);
  const int64_t ow = OutLength(w, spec.window[1], spec.stride[1], spec.same_padding);
  if (oh < 1 || ow < 1) {
    const std::string window =
        one_d ? absl::StrCat(spec.window[1]) : absl::StrCat(spec.window[0], "x", spec.window[1]);
    const std::string length = one_d ? absl::StrCat("a length of ", in[0])
                                     : absl::StrCat("an input of ", in[0], "x", in[1]);
    return absl::InvalidArgumentError(
        conv ? absl::StrCat(kind, " kernel ", window, " is longer than ", length,
                            " (valid padding): nothing is left to convolve")
             : absl::StrCat(kind, " pool ", window, " leaves zero length from ", length,
                            " (valid padding)"));
  }
  if (one_d) return Shape{ow, channels};
  return Shape{oh, ow, channels};
}

std::string OnnxNchw(OnnxGraph& g, const Shape& in, const OnnxValue& x) {
  if (x.nchw) return x.name;
  if (in.size() == 2) return g.Transpose(g.Reshape(x.name, {1, in[0], in[1]}), {0, 3, 1, 2});
  return g.Transpose(x.name, {0, 3, 1, 2});
}

std::vector<OnnxAttr> OnnxWindowAttrs(const LayerSpec& spec) {
  return {OnnxAttr::Ints("strides", {spec.stride[0], spec.stride[1]}),
          OnnxAttr::String("auto_pad", spec.same_padding ? "SAME_UPPER" : "VALID")};
}

}  // namespace kinds
}  // namespace pstrain::model
