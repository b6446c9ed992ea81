#include "base/event_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "base/crc32c.h"
#include "base/file_util.h"
#include "proto/event.pb.h"

namespace pstrain {
namespace {

void PutLittleEndian(uint64_t v, int bytes, std::string* out) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t GetLittleEndian(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

double WallTime() { return absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()); }

std::string JsonNumber(double v) {
  return std::isfinite(v) ? absl::StrFormat("%.9g", v) : std::string("null");
}

// Tags are our own names ("loss", "train/accuracy"); escape what JSON needs.
std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppendFormat(&out, "\\u%04x", c);
    } else {
      out.push_back(c);
    }
  }
  return out + "\"";
}

}  // namespace

absl::StatusOr<std::unique_ptr<EventWriter>> EventWriter::Open(const std::string& dir,
                                                               bool with_jsonl) {
  if (absl::Status s = MakeDirs(dir); !s.ok()) return s;
  char host[256] = "localhost";
  ::gethostname(host, sizeof(host) - 1);
  std::unique_ptr<EventWriter> w(new EventWriter);
  const std::string base = absl::StrCat(
      dir, "/events.out.tfevents.", absl::ToUnixSeconds(absl::Now()), ".", host, ".", ::getpid());
  w->dir_ = dir;
  w->jsonl_path_ = dir + "/scalars.jsonl";
  // A writer opened in the same second by this process takes the next free
  // name (".1", ".2", ...) rather than truncating the other's file.
  for (int i = 0; i < 1000 && w->events_ == nullptr; ++i) {
    w->path_ = i == 0 ? base : absl::StrCat(base, ".", i);
    w->events_ = std::fopen(w->path_.c_str(), "wbx");
    if (w->events_ == nullptr && errno != EEXIST) break;
  }
  if (w->events_ == nullptr) {
    return absl::InternalError(
        absl::StrCat("cannot create ", w->path_, ": ", std::strerror(errno)));
  }
  if (with_jsonl) w->jsonl_ = std::fopen(w->jsonl_path_.c_str(), "ab");
  if (with_jsonl && w->jsonl_ == nullptr) {
    return absl::InternalError(
        absl::StrCat("cannot open ", w->jsonl_path_, ": ", std::strerror(errno)));
  }
  events::Event first;
  first.set_wall_time(WallTime());
  first.set_file_version("brain.Event:2");
  if (absl::Status s = w->WriteRecord(first.SerializeAsString()); !s.ok()) return s;
  return w;
}

EventWriter::~EventWriter() {
  if (events_ != nullptr) std::fclose(events_);
  if (jsonl_ != nullptr) std::fclose(jsonl_);
}

absl::Status EventWriter::WriteRecord(const std::string& data) {
  std::string header;
  PutLittleEndian(data.size(), 8, &header);
  std::string framed = header;
  PutLittleEndian(MaskCrc32c(Crc32c(header.data(), header.size())), 4, &framed);
  framed += data;
  PutLittleEndian(MaskCrc32c(Crc32c(data.data(), data.size())), 4, &framed);
  if (std::fwrite(framed.data(), 1, framed.size(), events_) != framed.size() ||
      std::fflush(events_) != 0) {
    return absl::InternalError(absl::StrCat("cannot write ", path_, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status EventWriter::WriteScalars(int64_t step, const Scalars& scalars) {
  events::Event e;
  const double now = WallTime();
  e.set_wall_time(now);
  e.set_step(step);
  std::string line = absl::StrFormat("{\"wall_time\": %.3f, \"step\": %d", now, step);
  for (const auto& [tag, value] : scalars) {
    events::SummaryValue* v = e.mutable_summary()->add_value();
    v->set_tag(tag);
    v->set_simple_value(static_cast<float>(value));
    absl::StrAppend(&line, ", ", JsonString(tag), ": ", JsonNumber(value));
  }
  line += "}\n";
  if (absl::Status s = WriteRecord(e.SerializeAsString()); !s.ok()) return s;
  if (jsonl_ == nullptr) return absl::OkStatus();
  if (std::fwrite(line.data(), 1, line.size(), jsonl_) != line.size() || std::fflush(jsonl_) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot write ", jsonl_path_, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> EventWriter::WriteScalarsOnce(int64_t step, const Scalars& scalars) {
  if (jsonl_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("the event writer of ", dir_, " keeps no scalars.jsonl"));
  }
  const std::string lock_path = dir_ + "/.scalars.lock";
  const int lock = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock < 0) return FileError("cannot open", lock_path);
  if (::flock(lock, LOCK_EX) != 0) {
    absl::Status s = FileError("cannot lock", lock_path);
    ::close(lock);
    return s;
  }
  // Lines as WriteScalars writes them: {"wall_time": T, "step": S, ...}.
  const std::string key = absl::StrCat("\"step\": ", step);
  bool written = false;
  for (absl::string_view line : absl::StrSplit(ReadFile(jsonl_path_).value_or(""), '\n')) {
    const size_t at = line.find(key);
    if (at != absl::string_view::npos && at + key.size() < line.size() &&
        (line[at + key.size()] == ',' || line[at + key.size()] == '}')) {
      written = true;
      break;
    }
  }
  absl::Status s = written ? absl::OkStatus() : WriteScalars(step, scalars);
  ::close(lock);  // releases the flock
  if (!s.ok()) return s;
  return !written;
}

absl::Status EventWriter::WritePluginData(int64_t step, const std::string& tag,
                                          const std::string& plugin, const std::string& content) {
  events::Event e;
  e.set_wall_time(WallTime());
  e.set_step(step);
  events::SummaryValue* v = e.mutable_summary()->add_value();
  v->set_tag(tag);
  events::SummaryMetadata::PluginData* data = v->mutable_metadata()->mutable_plugin_data();
  data->set_plugin_name(plugin);
  data->set_content(content);
  return WriteRecord(e.SerializeAsString());
}

absl::StatusOr<std::vector<EventRecord>> ReadEventFile(const std::string& path) {
  auto contents = ReadFile(path);
  if (!contents.ok()) return contents.status();
  const auto* data = reinterpret_cast<const unsigned char*>(contents->data());
  const size_t size = contents->size();
  std::vector<EventRecord> out;
  size_t at = 0;
  auto bad = [&](size_t offset, absl::string_view what) {
    return absl::DataLossError(absl::StrCat(path, ": record at byte ", offset, ": ", what));
  };
  while (at < size) {
    if (size - at < 12) return bad(at, "cut short in its header");
    const uint64_t len = GetLittleEndian(data + at, 8);
    const uint32_t len_crc = static_cast<uint32_t>(GetLittleEndian(data + at + 8, 4));
    if (UnmaskCrc32c(len_crc) != Crc32c(data + at, 8)) return bad(at, "length CRC mismatch");
    if (len > size - at - 12 || size - at - 12 - len < 4) return bad(at, "cut short in its data");
    const unsigned char* body = data + at + 12;
    const uint32_t body_crc = static_cast<uint32_t>(GetLittleEndian(body + len, 4));
    if (UnmaskCrc32c(body_crc) != Crc32c(body, len)) return bad(at, "data CRC mismatch");
    events::Event e;
    if (!e.ParseFromArray(body, static_cast<int>(len))) return bad(at, "data is not an Event");
    EventRecord r;
    r.wall_time = e.wall_time();
    r.step = e.step();
    r.file_version = e.file_version();
    for (const events::SummaryValue& v : e.summary().value()) {
      if (v.has_metadata() && !v.metadata().plugin_data().plugin_name().empty()) {
        r.plugin_values.push_back({v.tag(), v.metadata().plugin_data().plugin_name(),
                                   v.metadata().plugin_data().content()});
      }
      if (v.has_simple_value()) r.scalars.emplace_back(v.tag(), v.simple_value());
    }
    out.push_back(std::move(r));
    at += 12 + len + 4;
  }
  return out;
}

}  // namespace pstrain
