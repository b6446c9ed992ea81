#include "base/event_file.h"

#include <atomic>
#include <cmath>
#include <map>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "base/crc32c.h"
#include "base/file_util.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

uint64_t Le(const std::string& s, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + i]);
  return v;
}

TEST(EventFileTest, WritesTfRecordFramedEventsThatReadBack) {
  const std::string dir = testing::TempDir() + "/events/train";
  std::string path, jsonl;
  {
    ASSERT_OK_AND_ASSIGN(auto w, EventWriter::Open(dir));
    path = w->path();
    jsonl = w->jsonl_path();
    EXPECT_EQ(path.rfind(dir + "/events.out.tfevents.", 0), 0u) << path;
    ASSERT_OK(w->WriteScalars(100, {{"loss", 0.5}, {"accuracy", 0.875}}));
    ASSERT_OK(w->WriteScalars(200, {{"loss", 0.25}, {"examples_per_sec", 12345}}));
  }
  // The framing, checked by hand from the specification: the first record's
  // length, its masked CRC, and the data CRC after the data.
  ASSERT_OK_AND_ASSIGN(std::string raw, ReadFile(path));
  const uint64_t len = Le(raw, 0, 8);
  EXPECT_EQ(Le(raw, 8, 4), MaskCrc32c(Crc32c(raw.data(), 8)));
  EXPECT_EQ(Le(raw, 12 + len, 4), MaskCrc32c(Crc32c(raw.data() + 12, len)));

  ASSERT_OK_AND_ASSIGN(std::vector<EventRecord> records, ReadEventFile(path));
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].file_version, "brain.Event:2");
  EXPECT_GT(records[0].wall_time, 1.7e9);
  EXPECT_EQ(records[1].step, 100);
  ASSERT_EQ(records[1].scalars.size(), 2u);
  EXPECT_EQ(records[1].scalars[0].first, "loss");
  EXPECT_FLOAT_EQ(records[1].scalars[0].second, 0.5f);
  EXPECT_EQ(records[1].scalars[1].first, "accuracy");
  EXPECT_FLOAT_EQ(records[1].scalars[1].second, 0.875f);
  EXPECT_EQ(records[2].step, 200);
  EXPECT_FLOAT_EQ(records[2].scalars[1].second, 12345.0f);
  EXPECT_GE(records[2].wall_time, records[1].wall_time);

  ASSERT_OK_AND_ASSIGN(std::string lines, ReadFile(jsonl));
  std::istringstream in(lines);
  std::string first, second;
  std::getline(in, first);
  std::getline(in, second);
  EXPECT_NE(first.find("\"step\": 100, \"loss\": 0.5, \"accuracy\": 0.875}"), std::string::npos)
      << first;
  EXPECT_NE(second.find("\"step\": 200, \"loss\": 0.25, \"examples_per_sec\": 12345}"),
            std::string::npos)
      << second;
}

// A scalar of 0 is written, not left out as proto3 leaves out defaults
// (TensorBoard would skip a value without one); plugin data reads back;
// two writers opened in one second keep separate files.
TEST(EventFileTest, ZeroScalarsPluginDataAndTwoWritersInOneSecond) {
  const std::string dir = testing::TempDir() + "/events/zero";
  ASSERT_OK_AND_ASSIGN(auto a, EventWriter::Open(dir));
  ASSERT_OK_AND_ASSIGN(auto b, EventWriter::Open(dir, /*with_jsonl=*/false));
  EXPECT_NE(a->path(), b->path());
  ASSERT_OK(a->WriteScalars(1, {{"accuracy", 0.0}}));
  ASSERT_OK(b->WritePluginData(0, "_hparams_/session_end_info", "hparams",
                               std::string("\x22\x02\x08\x01", 4)));
  ASSERT_OK_AND_ASSIGN(std::string raw, ReadFile(a->path()));
  EXPECT_NE(raw.find(std::string("\x15\0\0\0\0", 5)), std::string::npos)
      << "simple_value 0 (field 2, fixed32) is not in the record";
  ASSERT_OK_AND_ASSIGN(std::vector<EventRecord> ra, ReadEventFile(a->path()));
  ASSERT_EQ(ra.size(), 2u);
  ASSERT_EQ(ra[1].scalars.size(), 1u);
  EXPECT_EQ(ra[1].scalars[0].second, 0.0f);
  ASSERT_OK_AND_ASSIGN(std::vector<EventRecord> rb, ReadEventFile(b->path()));
  ASSERT_EQ(rb.size(), 2u);
  EXPECT_TRUE(rb[1].scalars.empty());
  ASSERT_EQ(rb[1].plugin_values.size(), 1u);
  EXPECT_EQ(rb[1].plugin_values[0].tag, "_hparams_/session_end_info");
  EXPECT_EQ(rb[1].plugin_values[0].plugin, "hparams");
  EXPECT_EQ(rb[1].plugin_values[0].content, std::string("\x22\x02\x08\x01", 4));
}

// Two writers of one directory (a chief and an evaluator it does not
// know of), racing on the same steps: each step is written exactly once.
TEST(EventFileTest, WriteScalarsOnceWritesEachStepOnceAcrossWriters) {
  const std::string dir = testing::FreshTempDir("events_once");
  ASSERT_OK_AND_ASSIGN(auto first, EventWriter::Open(dir));
  ASSERT_OK_AND_ASSIGN(auto second, EventWriter::Open(dir));
  // "step": 1 is a prefix of "step": 10, and not the same step.
  ASSERT_OK_AND_ASSIGN(bool wrote, first->WriteScalarsOnce(10, {{"accuracy", 0.5}}));
  EXPECT_TRUE(wrote);
  ASSERT_OK_AND_ASSIGN(wrote, second->WriteScalarsOnce(1, {{"accuracy", 0.25}}));
  EXPECT_TRUE(wrote);
  ASSERT_OK_AND_ASSIGN(wrote, second->WriteScalarsOnce(10, {{"accuracy", 0.5}}));
  EXPECT_FALSE(wrote);
  constexpr int kSteps = 200;
  std::atomic<int> wrote_count{0};
  auto race = [&](EventWriter* w) {
    for (int step = 100; step < 100 + kSteps; ++step) {
      absl::StatusOr<bool> r = w->WriteScalarsOnce(step, {{"loss", 1.0 * step}});
      ASSERT_TRUE(r.ok()) << r.status();
      wrote_count += *r ? 1 : 0;
    }
  };
  std::thread a(race, first.get());
  std::thread b(race, second.get());
  a.join();
  b.join();
  EXPECT_EQ(wrote_count.load(), kSteps);
  ASSERT_OK_AND_ASSIGN(std::string lines, ReadFile(dir + "/scalars.jsonl"));
  std::map<std::string, int> per_step;
  std::istringstream in(lines);
  for (std::string line; std::getline(in, line);) {
    const size_t at = line.find("\"step\": ");
    ASSERT_NE(at, std::string::npos) << line;
    ++per_step[line.substr(at + 8, line.find(',', at) - at - 8)];
  }
  EXPECT_EQ(per_step.size(), static_cast<size_t>(kSteps + 2));
  for (const auto& [step, n] : per_step) EXPECT_EQ(n, 1) << "step " << step;
  // The event files hold the same: every step once over both.
  ASSERT_OK_AND_ASSIGN(std::vector<EventRecord> ra, ReadEventFile(first->path()));
  ASSERT_OK_AND_ASSIGN(std::vector<EventRecord> rb, ReadEventFile(second->path()));
  EXPECT_EQ(ra.size() - 1 + rb.size() - 1, static_cast<size_t>(kSteps + 2));
  ASSERT_OK_AND_ASSIGN(auto no_jsonl, EventWriter::Open(dir, /*with_jsonl=*/false));
  EXPECT_EQ(no_jsonl->WriteScalarsOnce(1, {}).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(EventFileTest, CorruptOrCutFilesAreNamedWithTheOffset) {
  const std::string dir = testing::TempDir() + "/events/bad";
  std::string path;
  {
    ASSERT_OK_AND_ASSIGN(auto w, EventWriter::Open(dir));
    path = w->path();
    ASSERT_OK(w->WriteScalars(1, {{"loss", 1.0}}));
  }
  ASSERT_OK_AND_ASSIGN(std::string raw, ReadFile(path));
  const size_t second = 12 + Le(raw, 0, 8) + 4;
  std::string flipped = raw;
  flipped[second + 14] ^= 0x01;  // a byte of the second record's data
  ASSERT_OK(WriteFileAtomically(path, flipped));
  EXPECT_EQ(ReadEventFile(path).status().message(),
            path + ": record at byte " + std::to_string(second) + ": data CRC mismatch");
  flipped = raw;
  flipped[second + 2] ^= 0x01;  // its length
  ASSERT_OK(WriteFileAtomically(path, flipped));
  EXPECT_EQ(ReadEventFile(path).status().message(),
            path + ": record at byte " + std::to_string(second) + ": length CRC mismatch");
  ASSERT_OK(WriteFileAtomically(path, raw.substr(0, raw.size() - 3)));
  EXPECT_EQ(ReadEventFile(path).status().message(),
            path + ": record at byte " + std::to_string(second) + ": cut short in its data");
  EXPECT_EQ(ReadEventFile(dir + "/none").status().code(), absl::StatusCode::kNotFound);
}

TEST(EventFileTest, NonFiniteValuesAreNullInJson) {
  const std::string dir = testing::TempDir() + "/events/nan";
  ASSERT_OK_AND_ASSIGN(auto w, EventWriter::Open(dir));
  ASSERT_OK(w->WriteScalars(3, {{"loss", std::nan("")}}));
  ASSERT_OK_AND_ASSIGN(std::string lines, ReadFile(w->jsonl_path()));
  EXPECT_NE(lines.find("\"loss\": null}"), std::string::npos) << lines;
}

}  // namespace
}  // namespace pstrain
