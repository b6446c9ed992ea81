// pstrain on a slow disk, for tests that kill a PS while it writes a
// checkpoint: every checkpoint shard, written whole under its temporary
// name, waits PSTRAIN_TEST_SHARD_PAUSE_MS milliseconds (an environment
// variable of this test binary; 0 or unset: none) before it is synced and
// renamed into place. Everything else is the pstrain binary itself
// (cli/pstrain_main.h), its file system wrapped (base/env.h). The
// production binary has no such pause, flag or variable.
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "cli/pstrain_main.h"
#include "base/env.h"

namespace {

class SlowShardFile final : public pstrain::WritableFile {
 public:
  SlowShardFile(std::unique_ptr<pstrain::WritableFile> file, absl::Duration pause)
      : file_(std::move(file)), pause_(pause) {}
  absl::Status Append(absl::string_view data) override { return file_->Append(data); }
  absl::Status Sync() override {
    absl::SleepFor(pause_);
    return file_->Sync();
  }
  absl::Status Close() override { return file_->Close(); }

 private:
  const std::unique_ptr<pstrain::WritableFile> file_;
  const absl::Duration pause_;
};

class SlowShardEnv final : public pstrain::EnvWrapper {
 public:
  SlowShardEnv(pstrain::Env* target, absl::Duration pause) : EnvWrapper(target), pause_(pause) {}
  absl::StatusOr<std::unique_ptr<pstrain::WritableFile>> NewWritableFile(
      const std::string& path) override {
    auto file = target()->NewWritableFile(path);
    if (!file.ok() || !absl::StrContains(path, "/shard-") || !absl::EndsWith(path, ".tmp")) {
      return file;
    }
    return std::unique_ptr<pstrain::WritableFile>(
        std::make_unique<SlowShardFile>(*std::move(file), pause_));
  }

 private:
  const absl::Duration pause_;
};

}  // namespace

int main(int argc, char** argv) {
  int64_t ms = 0;
  const char* pause = std::getenv("PSTRAIN_TEST_SHARD_PAUSE_MS");
  if (pause != nullptr && absl::SimpleAtoi(pause, &ms) && ms > 0) {
    pstrain::Env::SetDefault(new SlowShardEnv(pstrain::Env::Default(), absl::Milliseconds(ms)));
  }
  return pstrain::PstrainMain(argc, argv);
}
