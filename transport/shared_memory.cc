#include "transport/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pstrain {
namespace {

absl::StatusOr<uint64_t> RandomWord() {
  uint64_t v = 0;
  if (getrandom(&v, sizeof(v), 0) != static_cast<ssize_t>(sizeof(v))) {
    return absl::InternalError(absl::StrCat("getrandom: ", std::strerror(errno)));
  }
  return v;
}

absl::StatusOr<char*> Map(int fd, int64_t bytes, const std::string& name) {
  void* p = mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot map shared memory ", name, ": ", std::strerror(errno)));
  }
  return static_cast<char*>(p);
}

}  // namespace

absl::StatusOr<std::unique_ptr<SharedRegion>> SharedRegion::Create(int64_t bytes) {
  if (bytes <= kDataStart) {
    return absl::InvalidArgumentError(
        absl::StrCat("a shared region needs more than ", kDataStart, " bytes, not ", bytes));
  }
  auto token = RandomWord();
  if (!token.ok()) return token.status();
  auto salt = RandomWord();
  if (!salt.ok()) return salt.status();
  const std::string name = absl::StrFormat("/pstrain-%d-%016x", getpid(), *salt);
  const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot create shared memory ", name, ": ", std::strerror(errno)));
  }
  if (ftruncate(fd, bytes) != 0) {
    const int err = errno;
    close(fd);
    shm_unlink(name.c_str());
    return absl::ResourceExhaustedError(absl::StrCat("cannot size shared memory ", name,
                                                     " to ", bytes, " bytes: ",
                                                     std::strerror(err)));
  }
  auto data = Map(fd, bytes, name);
  close(fd);
  if (!data.ok()) {
    shm_unlink(name.c_str());
    return data.status();
  }
  std::memcpy(*data, &*token, sizeof(uint64_t));
  return std::unique_ptr<SharedRegion>(new SharedRegion(name, bytes, *token, *data, true));
}

absl::StatusOr<std::unique_ptr<SharedRegion>> SharedRegion::Open(const std::string& name,
                                                                 int64_t bytes,
                                                                 uint64_t token) {
  // Only names Create makes: one component under /dev/shm.
  if (name.size() < 2 || name[0] != '/' || name.find('/', 1) != std::string::npos ||
      name.size() > 255) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", name, "\" is not a shared memory name"));
  }
  if (bytes <= kDataStart) {
    return absl::InvalidArgumentError(
        absl::StrCat("shared memory ", name, " of ", bytes, " bytes is too small"));
  }
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot open shared memory ", name, ": ", std::strerror(errno),
        " (the client is on another host or has its own /dev/shm)"));
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size != bytes) {
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat(
        "shared memory ", name, " is ", static_cast<int64_t>(st.st_size), " bytes, not ", bytes));
  }
  auto data = Map(fd, bytes, name);
  close(fd);
  if (!data.ok()) return data.status();
  uint64_t found = 0;
  std::memcpy(&found, *data, sizeof(found));
  if (found != token) {
    munmap(*data, static_cast<size_t>(bytes));
    return absl::FailedPreconditionError(absl::StrCat(
        "shared memory ", name, " does not hold the client's token: another object"));
  }
  return std::unique_ptr<SharedRegion>(new SharedRegion(name, bytes, token, *data, false));
}

SharedRegion::~SharedRegion() {
  munmap(data_, static_cast<size_t>(size_));
  Unlink();
}

void SharedRegion::Unlink() {
  if (!linked_) return;
  linked_ = false;
  shm_unlink(name_.c_str());
}

std::optional<int64_t> RegionRing::Allocate(int64_t n) {
  if (n <= 0) return std::nullopt;
  n = (n + 63) / 64 * 64;
  if (held_.empty()) {
    if (n > end_ - begin_) return std::nullopt;
    held_.push_back({begin_, begin_ + n});
    return begin_;
  }
  const int64_t head = held_.back().end;
  const int64_t tail = held_.front().offset;
  int64_t at = -1;
  if (head > tail) {  // used: [tail, head); free: [head, end) and [begin, tail)
    if (n <= end_ - head) {
      at = head;
    } else if (n <= tail - begin_) {
      at = begin_;
    }
  } else if (n <= tail - head) {  // wrapped; free: [head, tail)
    at = head;
  }
  if (at < 0) return std::nullopt;
  held_.push_back({at, at + n});
  return at;
}

void RegionRing::FreeOldest() { held_.pop_front(); }

}  // namespace pstrain
