#include "base/subprocess.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace pstrain {

absl::StatusOr<pid_t> Spawn(const SpawnOptions& options) {
  if (options.argv.empty()) return absl::InvalidArgumentError("Spawn: empty argv");
  int log_fd = -1;
  if (!options.log_path.empty()) {
    log_fd = ::open(options.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (log_fd < 0) {
      return absl::InternalError(absl::StrCat("cannot open log ", options.log_path,
                                              ": ", std::strerror(errno)));
    }
  }
  // Build everything before fork: the child may only call async-signal-safe
  // functions.
  std::vector<char*> argv;
  for (const std::string& a : options.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> env_storage;
  for (char** e = environ; *e != nullptr; ++e) {
    absl::string_view entry(*e);
    bool replaced = false;
    for (const auto& [k, v] : options.env) {
      if (entry.size() > k.size() && entry.substr(0, k.size()) == k && entry[k.size()] == '=') {
        replaced = true;
      }
    }
    if (!replaced) env_storage.emplace_back(entry);
  }
  for (const auto& [k, v] : options.env) env_storage.push_back(absl::StrCat(k, "=", v));
  std::vector<char*> envp;
  for (std::string& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);
  const pid_t parent = ::getpid();

  pid_t pid = ::fork();
  if (pid < 0) {
    if (log_fd >= 0) ::close(log_fd);
    return absl::InternalError(absl::StrCat("fork for ", options.argv[0], ": ",
                                            std::strerror(errno)));
  }
  if (pid == 0) {
    if (options.die_with_parent) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
    }
    // Children start with default signal handling and nothing blocked.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (log_fd >= 0) {
      ::dup2(log_fd, STDOUT_FILENO);
      ::dup2(log_fd, STDERR_FILENO);
    }
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  if (log_fd >= 0) ::close(log_fd);
  return pid;
}

namespace {

std::optional<ChildExit> WaitFor(pid_t which, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int status = 0;
    pid_t pid = ::waitpid(which, &status, WNOHANG);
    if (pid > 0) {
      ChildExit e;
      e.pid = pid;
      e.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return e;
    }
    if (pid < 0 && errno == ECHILD) return std::nullopt;
    if (absl::Now() >= deadline) return std::nullopt;
    absl::SleepFor(absl::Milliseconds(20));
  }
}

}  // namespace

std::optional<ChildExit> WaitAnyChild(absl::Duration timeout) {
  return WaitFor(-1, timeout);
}

std::optional<ChildExit> WaitChild(pid_t pid, absl::Duration timeout) {
  if (pid <= 0) return std::nullopt;
  return WaitFor(pid, timeout);
}

void SignalChild(pid_t pid, int signo) {
  if (pid > 0) ::kill(pid, signo);
}

void StopChildren(const std::vector<pid_t>& pids, absl::Duration grace) {
  for (pid_t pid : pids) SignalChild(pid, SIGTERM);
  const absl::Time deadline = absl::Now() + grace;
  for (pid_t pid : pids) {
    if (!WaitChild(pid, std::max(absl::ZeroDuration(), deadline - absl::Now())).has_value()) {
      SignalChild(pid, SIGKILL);
      WaitChild(pid, absl::Seconds(5));
    }
  }
}

std::pair<int, int> EphemeralPortRange() {
  std::pair<int, int> range{32768, 60999};  // Linux's default
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0, high = 0;
  if (in >> low >> high && low >= 1 && low <= high && high <= 65535) range = {low, high};
  return range;
}

namespace {

// Binds a TCP socket to 127.0.0.1:`port` (0: one the kernel picks); its fd
// and the port bound, or -1 and the error.
int BindLoopback(int port, int* bound, absl::Status* error) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
    return -1;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    *error =
        absl::UnavailableError(absl::StrCat("bind 127.0.0.1:", port, ": ", std::strerror(errno)));
    ::close(fd);
    return -1;
  }
  *bound = ntohs(addr.sin_port);
  return fd;
}

}  // namespace

absl::StatusOr<std::vector<int>> PickFreePorts(int n) {
  // Between choosing a port and its task binding it, the kernel may give
  // it to anyone who asks for a port of its choosing (a listener on port 0,
  // or any outgoing connection), and those ports come from the ephemeral
  // range. Ports below it are never handed out so: tried at random there
  // first, the kernel's choice only when that range is too small or full.
  const auto [low, high] = EphemeralPortRange();
  constexpr int kLowest = 10000;
  std::vector<int> fds, ports;
  absl::Status status;
  std::mt19937 rng(static_cast<uint32_t>(::getpid()) * 2654435761u ^
                   static_cast<uint32_t>(absl::GetCurrentTimeNanos()));
  for (int i = 0; i < n && status.ok(); ++i) {
    int fd = -1, port = 0;
    for (int attempt = 0; attempt < 200 && fd < 0 && low - 1 > kLowest; ++attempt) {
      const int candidate = std::uniform_int_distribution<int>(kLowest, low - 1)(rng);
      if (std::find(ports.begin(), ports.end(), candidate) != ports.end()) continue;
      absl::Status ignored;
      fd = BindLoopback(candidate, &port, &ignored);
    }
    if (fd < 0) fd = BindLoopback(0, &port, &status);
    if (fd < 0) break;
    fds.push_back(fd);
    ports.push_back(port);
  }
  for (int fd : fds) ::close(fd);
  if (!status.ok()) return status;
  return ports;
}

}  // namespace pstrain
