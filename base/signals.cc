#include "base/signals.h"

#include <signal.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

namespace pstrain {
namespace {

// The write end of the self-pipe; set once before the handler is installed.
int g_signal_pipe = -1;

void OnSignal(int signo) {
  // Only async-signal-safe calls here: hand the number to the watcher thread.
  const int saved = errno;
  unsigned char b = static_cast<unsigned char>(signo);
  ssize_t ignored = ::write(g_signal_pipe, &b, 1);
  (void)ignored;
  errno = saved;
}

}  // namespace

void WatchStopSignals(std::function<void(int signo)> on_signal) {
  // A handler rather than sigwait: libraries such as OpenBLAS start threads
  // before main, and those would not have the signals blocked.
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return;
  g_signal_pipe = fds[1];
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  const int read_fd = fds[0];
  std::thread([read_fd, on_signal = std::move(on_signal)]() {
    while (true) {
      unsigned char b = 0;
      ssize_t n = ::read(read_fd, &b, 1);
      if (n == 1) {
        on_signal(b);
      } else if (n == 0 || (n < 0 && errno != EINTR)) {
        return;
      }
    }
  }).detach();
}

}  // namespace pstrain
