// Each layer kind is defined once: a LayerKindDef in a file of its own
// under model/kinds/ says what a model config and Keras call the kind and
// how its config fields read, how
// its output shape follows from its inputs', which variables it has (shape,
// initializer, trainable or a moving statistic), how the CPU computes it,
// whether and how the CUDA layer stack does, and which ONNX nodes export it.
// Everything else (model/network.h, the backends, `pstrain summary`, the ONNX
// export) asks the registry and holds no list of kinds.
//
// A new kind is its LayerKind value (model/layers.h), its config message
// and LayerConfig field (proto/model_config.proto; the field's name is the
// kind's name()) and one file there that reads the message (ParseConfig)
// and ends in PSTRAIN_REGISTER_LAYER_KIND(TheDef); LayerKindsTest checks
// that every LayerKind value and every layer field of the config has a
// definition.
//
// Thread-safe: definitions are immutable and registered before main().
#ifndef PSTRAIN_MODEL_LAYER_KIND_H_
#define PSTRAIN_MODEL_LAYER_KIND_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/status_macros.h"
#include "model/cuda_net_kernels.h"
#include "model/layers.h"
#include "model/onnx_graph.h"
#include "model/param_layout.h"

namespace google::protobuf {
class Message;
}  // namespace google::protobuf

namespace pstrain::model {

// A layer's entry in a model config as its kind reads it (model/
// model_config.h parses the file and says where each error is).
class LayerConfigEntry {
 public:
  virtual ~LayerConfigEntry() = default;
  // The kind's own message in the layer's config (proto/model_config.proto:
  // a DenseLayer for dense, a ConvLayer for conv2d, ...).
  virtual const google::protobuf::Message& message() const = 0;
  // The layer's number in the config, and whether it is the last (the
  // logits).
  virtual int index() const = 0;
  virtual bool last() const = 0;
  // InvalidArgument "FILE:LINE:COL: layer I (NAME): KIND.FIELD is
  // missing<hint>".
  virtual absl::Status Missing(const std::string& field, const std::string& hint) const = 0;
  // InvalidArgument at the field (at the layer when the field was not
  // written): "FILE:LINE:COL: layer I (NAME): KIND.FIELD <what>".
  virtual absl::Status Bad(const std::string& field, absl::string_view what) const = 0;
};

// One variable of a layer, as its kind declares it.
struct LayerVariable {
  // After "<layer name>/": "kernel", "bias", "gamma", "moving_mean", ...
  std::string suffix;
  Shape shape;
  ParamRole role = ParamRole::kKernel;
  enum class Init {
    kKernel,  // the layer's kernel_initializer (glorot_uniform by the shape's fans)
    kBias,    // the layer's bias_initializer
    kZeros,
    kOnes,
  };
  Init init = Init::kZeros;
  // A statistic the forward pass updates by increments (a batch
  // normalization's moving mean and variance): non-trainable, no optimizer
  // slots, never a gradient. Else trained by the optimizer unless the layer
  // is frozen (LayerSpec::trainable false).
  bool moving = false;
};

// What a CPU layer is built from. The variables lie in the flat parameter
// array from kernel_at (-1: none) one after another in the order the kind
// declares them; bias_at is the bias's (-1: none).
struct CpuLayerArgs {
  const LayerSpec& spec;
  const std::vector<Shape>& ins;  // one per input (several for a merge)
  const Shape& out;
  int max_batch;
  int64_t kernel_at;
  int64_t bias_at;
  // The zeros a zero_padding2d in front adds (top, bottom, left, right),
  // folded into this layer by the executor (model/network.h): ins[0] is
  // then the pad's input. Given only to a kind that folds_padding(), whose
  // CreateCpu returns null when it cannot compute the fold.
  std::array<int, 4> padding = {0, 0, 0, 0};
};

class LayerKindDef {
 public:
  virtual ~LayerKindDef() = default;

  virtual LayerKind kind() const = 0;
  // The model config's name of the kind ("dense", "conv2d", ...).
  virtual const char* name() const = 0;
  // Keras's class name, as model.summary() prints it ("Dense", ...).
  virtual const char* keras_class() const = 0;

  // Reads several inputs (add, concatenate): else exactly one.
  virtual bool merges() const { return false; }
  // Its output is its input's memory read in the same order (flatten).
  virtual bool aliases_input() const { return false; }
  // Takes a zero_padding2d in front into its own padding
  // (CpuLayerArgs::padding): the pad's output is then never written.
  virtual bool folds_padding() const { return false; }
  // Its kernel variable's suffix ("kernel", Keras's "depthwise_kernel"), or
  // null when the kind has no kernel (and so no kernel or bias initializer).
  virtual const char* kernel_name() const { return nullptr; }

  // Reads the kind's fields from its config message into `spec` (its
  // name, kind, inputs and trainable flag are set already), each checked
  // at its field; `in` is the shape of its first input.
  virtual absl::Status ParseConfig(const LayerConfigEntry& e, const Shape& in,
                                   LayerSpec* spec) const {
    return absl::OkStatus();
  }
  // The config field an input shape that does not fit the layer is
  // reported at ("kernel_size", "pool_size", ...), or "" for the layer.
  virtual const char* shape_field() const { return ""; }

  // The output shape for inputs `ins` (their number already checked: one,
  // or at least two for a merge), or InvalidArgument saying what does not
  // fit, without the layer's name (the caller says where).
  virtual absl::StatusOr<Shape> OutputShape(const LayerSpec& spec,
                                            const std::vector<Shape>& ins) const = 0;

  // The layer's variables for (first) input `in`, in the flat array's
  // order. REQUIRES: OutputShape ok.
  virtual std::vector<LayerVariable> Variables(const LayerSpec& spec, const Shape& in) const {
    return {};
  }

  // The CPU's computation. REQUIRES: OutputShape(args.spec, args.ins) is
  // args.out.
  virtual std::unique_ptr<Layer> CreateCpu(const CpuLayerArgs& args) const = 0;

  // The CUDA layer stack's description of the layer (its kind, sizes and
  // window; the caller sets in_size, out_size, kernel_at and bias_at), or
  // Unimplemented saying what the CUDA layers do not compute ("conv2d
  // without a bias", say; the caller names the layer).
  virtual absl::Status DescribeCuda(const LayerSpec& spec, const Shape& in,
                                    PstrainCudaLayer* layer) const;

  // The layer in inference over `xs` (one value per input, of shapes
  // `ins`): its ONNX nodes in `g`, and its output. The last layer's
  // softmax or sigmoid is not the layer's: the caller adds it.
  virtual absl::StatusOr<OnnxValue> ExportOnnx(OnnxGraph& g, const LayerSpec& spec,
                                               const std::vector<Shape>& ins,
                                               const std::vector<OnnxValue>& xs) const = 0;
};

// The definition of `kind`. REQUIRES: registered (every LayerKind is).
const LayerKindDef& KindDef(LayerKind kind);
// The kind a config calls `name`, or null.
const LayerKindDef* FindKindDef(std::string_view name);
// Every registered definition, in LayerKind order.
std::vector<const LayerKindDef*> AllKindDefs();

// Registers `def` (a static object) at load time; a second definition of
// one kind aborts the process.
bool RegisterLayerKind(const LayerKindDef* def);

#define PSTRAIN_LAYER_KIND_JOIN_(a, b) a##b
#define PSTRAIN_LAYER_KIND_FLAG_(line) \
  PSTRAIN_LAYER_KIND_JOIN_(pstrain_layer_kind_registered_, line)
#define PSTRAIN_REGISTER_LAYER_KIND(def)                                  \
  [[maybe_unused]] static const bool PSTRAIN_LAYER_KIND_FLAG_(__LINE__) = \
      ::pstrain::model::RegisterLayerKind(&(def))

// Shared by the kinds' definitions.
namespace kinds {

// InvalidArgument unless `in` has `rank` axes: "<kind> needs a <form> input
// but its input is [..]", with a hint for a flat input.
absl::Status NeedRank(const LayerSpec& spec, const Shape& in, size_t rank, const char* form);

// InvalidArgument when the kernel (for input `in`) is larger than 2^31
// values: kernels are held whole in each worker's flat array.
absl::Status CheckKernelSize(const LayerSpec& spec, const Shape& kernel);

// Dense and convolutions: not both relu and another activation; softmax
// only where `softmax` (a dense layer's, which model/model_graph.h then
// allows on the last layer alone).
absl::Status CheckLayerActivation(const LayerSpec& spec, bool softmax);

// Unimplemented for what the CUDA layer stack's dense and convolution
// kernels lack: a layer without a bias, an activation other than ReLU.
absl::Status CudaKernelLayer(const LayerSpec& spec);

// The kernel, then the bias unless !spec.use_bias.
std::vector<LayerVariable> KernelAndBias(const LayerSpec& spec, const char* kernel_suffix,
                                         Shape kernel, int64_t bias);

// A convolution's or pool's output shape for `in` ([steps, channels] when
// `one_d`, else [height, width, channels]) with `channels` outputs, or the
// errors of a window or stride below 1 or one that leaves no output.
absl::StatusOr<Shape> WindowOutputShape(const LayerSpec& spec, const Shape& in, bool one_d,
                                        int64_t channels);

// A convolution's or pool's input in NCHW (transposed there unless it is;
// a 1D one's [n, c, 1, t]).
std::string OnnxNchw(OnnxGraph& g, const Shape& in, const OnnxValue& x);
// A convolution's or pool's strides and Keras's padding ("same": the odd
// one after, SAME_UPPER).
std::vector<OnnxAttr> OnnxWindowAttrs(const LayerSpec& spec);

// The ONNX Conv of a conv1d, conv2d or depthwise_conv2d (a Conv of C
// groups) from `x` of `in`, its output left in NCHW (model/kinds/conv.cc).
absl::StatusOr<OnnxValue> ConvOnnxNode(OnnxGraph& g, const LayerSpec& spec, const Shape& in,
                                       const OnnxValue& x);

}  // namespace kinds
}  // namespace pstrain::model

#endif  // PSTRAIN_MODEL_LAYER_KIND_H_
