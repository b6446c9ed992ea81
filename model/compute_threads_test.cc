// The compute-thread setting holds for oneDNN's layers however the thread
// that builds the network is set: oneDNN fixes each primitive's thread
// count when it builds it, and the network builds its layers' primitives
// for max_batch when it is made, before any step. A network built where
// OpenMP's default is one thread per core and set to one compute thread
// must not start a second thread (a training task's default: two on a
// 2-core host would each spin two against the other's, many times slower).
// Alone in its binary, so no earlier test has started OpenMP's threads.
#include "model/compute_threads.h"

#include <filesystem>
#include <vector>

#include "base/testing/status_testing.h"
#include "gtest/gtest.h"
#include "model/model_config.h"
#include "model/network.h"

// libgomp's, declared as model/compute_threads.cc declares them (clang's
// own omp.h belongs to another runtime).
extern "C" int omp_get_num_procs();
extern "C" int omp_get_max_threads();

namespace pstrain::model {
namespace {

int ThreadsOfThisProcess() {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    (void)entry;
    ++n;
  }
  return n;
}

TEST(ComputeThreadsTest, ANetworkComputesOnTheSettingNotItsBuildersDefault) {
  if (omp_get_num_procs() < 2) GTEST_SKIP() << "one core: OpenMP's default is one thread already";
  ASSERT_GE(omp_get_max_threads(), 2);  // this thread's default
  SetComputeThreads(1);
  ASSERT_OK_AND_ASSIGN(ModelConfigFile file, ParseModelConfigFile(R"(
input_shape: [16, 16, 3]
layer { conv2d { filters: 16 kernel_size: 3 activation: relu } }
layer { batch_normalization {} }
layer { flatten {} }
layer { dense { units: 4 } }
)",
                                                                  "t.pbtxt"));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Network> net, Network::Create(file.job.model, 8));
  ASSERT_GT(net->onednn_layers(), 0);
  const std::vector<float> params = net->InitialParameters(1);
  std::vector<float> grads(params.size());
  std::vector<float> x(8 * 16 * 16 * 3, 0.5f);
  const std::vector<int32_t> y = {0, 1, 2, 3, 0, 1, 2, 3};
  const int before = ThreadsOfThisProcess();
  for (int step = 0; step < 3; ++step) {
    ASSERT_OK(
        net->ComputeGradients(params.data(), x.data(), y.data(), 8, grads.data(), nullptr, nullptr)
            .status());
  }
  EXPECT_EQ(ThreadsOfThisProcess(), before)
      << "a step started threads: oneDNN computed on more than the one compute thread set";
}

}  // namespace
}  // namespace pstrain::model
