#include "base/crash_handler.h"

#include <execinfo.h>
#include <signal.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#include "absl/debugging/failure_signal_handler.h"
#include "absl/debugging/symbolize.h"

namespace pstrain {
namespace {

constexpr int kFatalSignals[] = {SIGSEGV, SIGILL, SIGFPE, SIGABRT, SIGBUS, SIGTRAP};
constexpr int kMaxFrames = 64;

// Abseil's handler per signal, which ours hands over to.
struct sigaction g_next[NSIG];
std::atomic<bool> g_reporting{false};

// Only async-signal-safe calls from here on: write(2) and absl::Symbolize.
void Put(const char* s) {
  for (size_t left = std::strlen(s); left > 0;) {
    const ssize_t n = ::write(STDERR_FILENO, s, left);
    if (n <= 0) return;
    s += n;
    left -= static_cast<size_t>(n);
  }
}

void PutHex(uintptr_t v) {
  char text[2 + 2 * sizeof(v) + 1] = "0x";
  char digits[2 * sizeof(v)];
  int n = 0;
  do {
    digits[n++] = "0123456789abcdef"[v & 15];
    v >>= 4;
  } while (v != 0);
  for (int i = 0; i < n; ++i) text[2 + i] = digits[n - 1 - i];
  text[2 + n] = '\0';
  Put(text);
}

const char* SignalName(int signo) {
  switch (signo) {
    case SIGSEGV:
      return "SIGSEGV";
    case SIGILL:
      return "SIGILL";
    case SIGFPE:
      return "SIGFPE";
    case SIGABRT:
      return "SIGABRT";
    case SIGBUS:
      return "SIGBUS";
    case SIGTRAP:
      return "SIGTRAP";
  }
  return "signal";
}

uintptr_t FaultPc(void* ucontext) {
#if defined(__x86_64__)
  return static_cast<uintptr_t>(static_cast<ucontext_t*>(ucontext)->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
  return static_cast<uintptr_t>(static_cast<ucontext_t*>(ucontext)->uc_mcontext.pc);
#else
  (void)ucontext;
  return 0;
#endif
}

void PrintStack(int signo, void* ucontext) {
  void* frames[kMaxFrames];
  const int n = ::backtrace(frames, kMaxFrames);
  // Frames up to the signal's are this handler's own: start at the PC.
  const uintptr_t pc = FaultPc(ucontext);
  int first = 0;
  for (int i = 0; i < n; ++i) {
    if (reinterpret_cast<uintptr_t>(frames[i]) == pc) {
      first = i;
      break;
    }
  }
  Put("*** ");
  Put(SignalName(signo));
  Put(": stack of the crashing thread, innermost first:\n");
  for (int i = first; i < n; ++i) {
    const uintptr_t addr = reinterpret_cast<uintptr_t>(frames[i]);
    Put("    @ ");
    PutHex(addr);
    // A return address points past its call: look up the byte before it.
    char name[512];
    if (absl::Symbolize(reinterpret_cast<void*>(i == first ? addr : addr - 1), name,
                        sizeof(name))) {
      Put("  ");
      Put(name);
    }
    Put("\n");
  }
}

void OnFatalSignal(int signo, siginfo_t* info, void* ucontext) {
  if (!g_reporting.exchange(true)) PrintStack(signo, ucontext);
  const struct sigaction& next = g_next[signo];
  if ((next.sa_flags & SA_SIGINFO) != 0 && next.sa_sigaction != nullptr) {
    next.sa_sigaction(signo, info, ucontext);
  }
  // Abseil's handler re-raises and does not come back; if none was there,
  // die of the signal as the default would.
  ::signal(signo, SIG_DFL);
  ::raise(signo);
}

}  // namespace

void InstallCrashHandler(const char* argv0) {
  absl::InitializeSymbolizer(argv0);
  // The first backtrace() loads libgcc's unwinder, which is not safe in a
  // signal handler: do it now.
  void* warm[2];
  ::backtrace(warm, 2);
  struct sigaction term {};
  const bool saved_term = ::sigaction(SIGTERM, nullptr, &term) == 0;
  absl::InstallFailureSignalHandler(absl::FailureSignalHandlerOptions());
  // A SIGTERM is a request to stop, not a crash: no report for it.
  if (saved_term) ::sigaction(SIGTERM, &term, nullptr);
  for (int signo : kFatalSignals) {
    struct sigaction ours {};
    ::sigemptyset(&ours.sa_mask);
    // Abseil's handler set up an alternate stack: a stack overflow is
    // reported from there.
    ours.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    ours.sa_sigaction = OnFatalSignal;
    ::sigaction(signo, &ours, &g_next[signo]);
  }
}

}  // namespace pstrain
