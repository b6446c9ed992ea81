#include "model/cuda_plugin.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/file_util.h"
#include "model/cuda_device_kernels.h"
#include "model/cuda_mlp_kernels.h"
#include "model/cuda_net_kernels.h"

namespace pstrain::model {
namespace {

constexpr int kNotLoaded = 35;  // cudaErrorInsufficientDriver

// Every C function the plugin defines, named once: the table's members
// below and what Load binds.
#define PSTRAIN_CUDA_PLUGIN_FUNCTIONS(X)                                                     \
  X(compiled) X(device_count) X(device_name) X(sgd_update) X(mlp_create) X(mlp_destroy)   \
  X(mlp_run) X(mlp_last_timing) X(net_create) X(net_destroy) X(net_run) X(net_last_timing) \
  X(gemm_seconds)

struct Plugin {
  bool loaded = false;
  std::string origin;  // the path loaded, or why none was
#define PSTRAIN_PLUGIN_MEMBER(name) decltype(&pstrain_cuda_##name) name = nullptr;
  PSTRAIN_CUDA_PLUGIN_FUNCTIONS(PSTRAIN_PLUGIN_MEMBER)
#undef PSTRAIN_PLUGIN_MEMBER
};

// Where to look, in order.
std::vector<std::string> Candidates() {
  if (const char* env = std::getenv("PSTRAIN_CUDA_PLUGIN"); env != nullptr && *env != '\0') {
    return {env};
  }
  const std::string exe = SelfExecutablePath();
  if (exe.empty()) return {};
  const std::filesystem::path path(exe);
  const std::filesystem::path dir = path.parent_path();
  return {(dir / kCudaPluginName).string(),
          (dir.parent_path() / "lib/pstrain" / kCudaPluginName).string(),
          absl::StrCat(path.string(), ".runfiles/pstrain/", kCudaPluginName)};
}

template <typename F>
bool Bind(void* handle, const char* name, F* out, std::string* missing) {
  *out = reinterpret_cast<F>(dlsym(handle, name));
  if (*out == nullptr) absl::StrAppend(missing, missing->empty() ? "" : ", ", name);
  return *out != nullptr;
}

Plugin Load() {
  Plugin p;
  std::vector<std::string> tried;
  for (const std::string& candidate : Candidates()) {
    // An absolute path: dlopen looks a bare name up in the library path.
    char real[PATH_MAX];
    const std::string path = realpath(candidate.c_str(), real) != nullptr ? real : candidate;
    if (access(path.c_str(), F_OK) != 0) {
      tried.push_back(candidate);
      continue;
    }
    // Its own symbols first (a kernel calling another binds inside it), and
    // none of them visible to later loads.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      p.origin = absl::StrCat("cannot load ", path, ": ", why != nullptr ? why : "?");
      return p;
    }
    std::string missing;
    bool ok = true;
#define PSTRAIN_PLUGIN_BIND(name) ok &= Bind(handle, "pstrain_cuda_" #name, &p.name, &missing);
    PSTRAIN_CUDA_PLUGIN_FUNCTIONS(PSTRAIN_PLUGIN_BIND)
#undef PSTRAIN_PLUGIN_BIND
    if (!ok) {
      dlclose(handle);
      p = Plugin();
      p.origin = absl::StrCat(path, " is not this pstrain's CUDA plugin (it lacks ", missing, ")");
      return p;
    }
    p.loaded = true;
    p.origin = path;
    return p;
  }
  p.origin = tried.empty()
                 ? absl::StrCat("no ", kCudaPluginName, " (cannot tell where this binary is)")
                 : absl::StrCat("no ", kCudaPluginName, " at ", absl::StrJoin(tried, " or "));
  return p;
}

const Plugin& Get() {
  static const Plugin* const plugin = new Plugin(Load());
  return *plugin;
}

int NotLoaded(char* err, size_t err_len) {
  std::snprintf(err, err_len, "the CUDA plugin is not loaded: %s", Get().origin.c_str());
  return kNotLoaded;
}

}  // namespace

bool CudaPluginLoaded() { return Get().loaded; }
const std::string& CudaPluginOrigin() { return Get().origin; }

}  // namespace pstrain::model

using pstrain::model::Get;
using pstrain::model::NotLoaded;

extern "C" {

int pstrain_cuda_compiled() { return Get().loaded ? Get().compiled() : 0; }

int pstrain_cuda_device_count(int* count, char* err, size_t err_len) {
  *count = 0;
  return Get().loaded ? Get().device_count(count, err, err_len) : NotLoaded(err, err_len);
}

int pstrain_cuda_device_name(int index, char* name, size_t name_len, int* major, int* minor,
                             char* err, size_t err_len) {
  if (!Get().loaded) return NotLoaded(err, err_len);
  return Get().device_name(index, name, name_len, major, minor, err, err_len);
}

int pstrain_cuda_sgd_update(float* y, const float* g, size_t n, float lr, char* err,
                            size_t err_len) {
  if (!Get().loaded) return NotLoaded(err, err_len);
  return Get().sgd_update(y, g, n, lr, err, err_len);
}

int pstrain_cuda_mlp_create(int device, const int* dims, const int* relu, int num_layers,
                            const int64_t* kernel_offsets, const int64_t* bias_offsets,
                            int64_t num_params, int max_batch, PstrainCudaMlp** out, char* err,
                            size_t err_len) {
  *out = nullptr;
  if (!Get().loaded) return NotLoaded(err, err_len);
  return Get().mlp_create(device, dims, relu, num_layers, kernel_offsets, bias_offsets, num_params,
                          max_batch, out, err, err_len);
}

void pstrain_cuda_mlp_destroy(PstrainCudaMlp* mlp) {
  if (Get().loaded) Get().mlp_destroy(mlp);
}

int pstrain_cuda_mlp_run(PstrainCudaMlp* mlp, const float* params, const float* x,
                         const int32_t* labels, int batch, float* grads, float* input_grad,
                         double* loss_sum, int64_t* correct, char* err, size_t err_len) {
  if (!Get().loaded) return NotLoaded(err, err_len);
  return Get().mlp_run(mlp, params, x, labels, batch, grads, input_grad, loss_sum, correct, err,
                       err_len);
}

void pstrain_cuda_mlp_last_timing(const PstrainCudaMlp* mlp, double* copy_seconds,
                                  double* total_seconds) {
  *copy_seconds = 0;
  *total_seconds = 0;
  if (Get().loaded) Get().mlp_last_timing(mlp, copy_seconds, total_seconds);
}

int pstrain_cuda_net_create(int device, const PstrainCudaLayer* layers, int num_layers,
                            int64_t input_size, int sigmoid, int classes, int64_t num_params,
                            int max_batch, PstrainCudaNet** out, char* err, size_t err_len) {
  *out = nullptr;
  if (!Get().loaded) return NotLoaded(err, err_len);
  return Get().net_create(device, layers, num_layers, input_size, sigmoid, classes, num_params,
                          max_batch, out, err, err_len);
}

void pstrain_cuda_net_destroy(PstrainCudaNet* net) {
  if (Get().loaded) Get().net_destroy(net);
}

int pstrain_cuda_net_run(PstrainCudaNet* net, const float* params, const float* x,
                         const int32_t* labels, int batch, uint64_t step_seed, float* grads,
                         float* input_grad, double* loss_sum, int64_t* correct, float* probs,
                         char* err, size_t err_len) {
  if (!Get().loaded) return NotLoaded(err, err_len);
  return Get().net_run(net, params, x, labels, batch, step_seed, grads, input_grad, loss_sum,
                       correct, probs, err, err_len);
}

void pstrain_cuda_net_last_timing(const PstrainCudaNet* net, double* copy_seconds,
                                  double* total_seconds) {
  *copy_seconds = 0;
  *total_seconds = 0;
  if (Get().loaded) Get().net_last_timing(net, copy_seconds, total_seconds);
}

int pstrain_cuda_gemm_seconds(int device, const PstrainCudaGemm* gemms, int num_gemms,
                              double min_seconds, double* seconds_per_pass, char* err,
                              size_t err_len) {
  *seconds_per_pass = 0;
  if (!Get().loaded) return NotLoaded(err, err_len);
  return Get().gemm_seconds(device, gemms, num_gemms, min_seconds, seconds_per_pass, err, err_len);
}

}  // extern "C"
