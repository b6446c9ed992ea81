#include "model/layers.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/layer_kind.h"

namespace pstrain::model {

int64_t ShapeSize(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string KerasShape(const Shape& shape) {
  return absl::StrCat("(None, ", absl::StrJoin(shape, ", "), ")");
}

std::string ShapeString(const Shape& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

const char* LayerKindName(LayerKind kind) { return KindDef(kind).name(); }

bool LayerSpec::merges() const { return KindDef(kind).merges(); }
bool LayerSpec::has_kernel() const { return KindDef(kind).kernel_name() != nullptr; }
const char* LayerSpec::kernel_name() const {
  const char* name = KindDef(kind).kernel_name();
  return name == nullptr ? "kernel" : name;
}

namespace {

// Outputs along one axis of `in` steps for a window of `k` moved by `s`.
int64_t OutLength(int64_t in, int k, int s, bool same) {
  if (same) return (in + s - 1) / s;
  return in < k ? 0 : (in - k) / s + 1;
}

// Keras's "same": the padding before the first step (the odd one goes after).
int64_t PadBefore(int64_t in, int k, int s, bool same) {
  if (!same) return 0;
  const int64_t out = OutLength(in, k, s, true);
  return std::max<int64_t>((out - 1) * s + k - in, 0) / 2;
}

}  // namespace

PstrainWindow LayerWindow(const LayerSpec& spec, const Shape& in) {
  // [steps, channels] in 1D (h = 1), else [height, width, channels].
  const bool one_d = in.size() == 2;
  PstrainWindow g{};
  g.h = one_d ? 1 : in[0];
  g.w = one_d ? in[0] : in[1];
  g.c = in.back();
  g.kh = spec.window[0];
  g.kw = spec.window[1];
  g.sh = spec.stride[0];
  g.sw = spec.stride[1];
  g.oh = OutLength(g.h, g.kh, g.sh, spec.same_padding);
  g.ow = OutLength(g.w, g.kw, g.sw, spec.same_padding);
  g.pad_top = PadBefore(g.h, g.kh, g.sh, spec.same_padding);
  g.pad_left = PadBefore(g.w, g.kw, g.sw, spec.same_padding);
  return g;
}

void AppendConvGemms(const PstrainWindow& g, int64_t filters, int batch, bool input_grad,
                     std::vector<GemmShape>* out) {
  const int64_t rows = batch * g.oh * g.ow;
  const int64_t patch = int64_t{g.kh} * g.kw * g.c;
  out->push_back({false, false, rows, filters, patch});
  out->push_back({true, false, patch, filters, rows});
  if (input_grad) out->push_back({false, true, rows, patch, filters});
}

absl::StatusOr<Shape> LayerOutputShape(const LayerSpec& spec, const Shape& in) {
  return LayerOutputShapeForInputs(spec, std::vector<Shape>{in});
}

absl::StatusOr<Shape> LayerOutputShapeForInputs(const LayerSpec& spec,
                                                const std::vector<Shape>& ins) {
  const LayerKindDef& def = KindDef(spec.kind);
  if (!def.merges() && ins.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(def.name(), " reads one input, not ", ins.size()));
  }
  if (def.merges() && ins.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        def.name(), " needs at least two inputs (name them in inputs), not ", ins.size()));
  }
  return def.OutputShape(spec, ins);
}

std::vector<Shape> LayerVariableShapes(const LayerSpec& spec, const Shape& in) {
  std::vector<Shape> out;
  for (const LayerVariable& v : KindDef(spec.kind).Variables(spec, in)) out.push_back(v.shape);
  return out;
}

void KernelFans(const LayerSpec& spec, const Shape& in, int64_t* fan_in, int64_t* fan_out) {
  *fan_in = *fan_out = 0;
  for (const LayerVariable& v : KindDef(spec.kind).Variables(spec, in)) {
    if (v.init != LayerVariable::Init::kKernel) continue;
    const Shape& k = v.shape;
    // [..., in_channels, out_channels]: the receptive field is the rest.
    const int64_t field = ShapeSize(k) / (k[k.size() - 2] * k.back());
    *fan_in = field * k[k.size() - 2];
    *fan_out = field * k.back();
    return;
  }
}

namespace {

std::atomic<int>& CpuKernelsSetting() {
  static std::atomic<int> setting{[] {
    const char* env = std::getenv("PSTRAIN_CPU_KERNELS");
    const std::string_view given = env == nullptr ? "onednn" : env;
    if (given == "reference") return static_cast<int>(CpuKernels::kReference);
    if (given != "onednn") {
      std::fprintf(stderr,
                   "PSTRAIN_CPU_KERNELS=%s is neither onednn nor reference: oneDNN computes\n",
                   env);
    }
    return static_cast<int>(CpuKernels::kOneDnn);
  }()};
  return setting;
}

}  // namespace

CpuKernels CpuKernelsInUse() { return static_cast<CpuKernels>(CpuKernelsSetting().load()); }
void SetCpuKernels(CpuKernels kernels) { CpuKernelsSetting().store(static_cast<int>(kernels)); }
const char* CpuKernelsName(CpuKernels kernels) {
  return kernels == CpuKernels::kOneDnn ? "onednn" : "reference";
}

Layer::Layer(const LayerSpec& spec, const Shape& in, const Shape& out)
    : spec_(spec), in_(in), out_(out), in_size_(ShapeSize(in)), out_size_(ShapeSize(out)) {}

void BiasActivation(const float* __restrict bias, int64_t rows, int64_t n, bool relu,
                    float* __restrict out) {
  if (bias == nullptr) {  // no bias (use_bias: false): the ReLU alone
    if (relu) {
      for (int64_t i = 0; i < rows * n; ++i) out[i] = std::max(out[i], 0.0f);
    }
    return;
  }
  for (int64_t r = 0; r < rows; ++r) {
    float* __restrict o = out + r * n;
    if (relu) {
      for (int64_t j = 0; j < n; ++j) o[j] = std::max(o[j] + bias[j], 0.0f);
    } else {
      for (int64_t j = 0; j < n; ++j) o[j] += bias[j];
    }
  }
}

void ReluAndBiasGradient(const float* __restrict out, int64_t rows, int64_t n, bool relu,
                         float* __restrict d_out, float* __restrict gb) {
  if (gb == nullptr) {  // no bias: the ReLU's mask alone
    if (relu) {
      for (int64_t i = 0; i < rows * n; ++i) d_out[i] = out[i] > 0.0f ? d_out[i] : 0.0f;
    }
    return;
  }
  std::fill(gb, gb + n, 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    float* __restrict d = d_out + r * n;
    if (relu) {
      const float* __restrict o = out + r * n;
      for (int64_t j = 0; j < n; ++j) d[j] = o[j] > 0.0f ? d[j] : 0.0f;
    }
    for (int64_t j = 0; j < n; ++j) gb[j] += d[j];
  }
}

std::unique_ptr<Layer> Layer::CreateForInputs(const LayerSpec& spec, const std::vector<Shape>& ins,
                                              int max_batch, int64_t kernel_at, int64_t bias_at) {
  const Shape out = *LayerOutputShapeForInputs(spec, ins);
  return KindDef(spec.kind).CreateCpu(CpuLayerArgs{spec, ins, out, max_batch, kernel_at, bias_at});
}

std::unique_ptr<Layer> Layer::Create(const LayerSpec& spec, const Shape& in, int max_batch,
                                     int64_t kernel_at, int64_t bias_at) {
  return CreateForInputs(spec, std::vector<Shape>{in}, max_batch, kernel_at, bias_at);
}

}  // namespace pstrain::model
