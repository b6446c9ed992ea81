// worker: runs the worker task named by TF_CONFIG; only that role is linked in.
#include "job/task_main.h"
#include "worker/worker_main.h"

int main(int argc, char** argv) {
  return pstrain::RoleBinaryMain(argc, argv, pstrain::Role::kWorker, pstrain::worker::WorkerMain);
}
