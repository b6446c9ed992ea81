#include "base/crash_handler.h"

#include <csignal>

#include "absl/base/attributes.h"
#include "absl/base/config.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

// Read at run time, so the compiler cannot see the write is to null.
int* volatile g_pointer = nullptr;

ABSL_ATTRIBUTE_NOINLINE void WriteThroughANullPointerInOurCode() { *g_pointer = 1; }

ABSL_ATTRIBUTE_NOINLINE void CallerOfTheCrash() {
  WriteThroughANullPointerInOurCode();
  g_pointer = nullptr;  // not a tail call: the caller's frame stays
}

TEST(CrashHandlerDeathTest, ASegfaultPrintsTheStackFromTheFaultByFunctionName) {
#ifdef ABSL_HAVE_ADDRESS_SANITIZER
  GTEST_SKIP() << "AddressSanitizer reports segfaults itself";
#endif
  EXPECT_EXIT(
      {
        InstallCrashHandler("/proc/self/exe");
        CallerOfTheCrash();
      },
      ::testing::KilledBySignal(SIGSEGV),
      "\\*\\*\\* SIGSEGV: stack of the crashing thread, innermost first:\n"
      "    @ 0x[0-9a-f]+  pstrain::.*WriteThroughANullPointerInOurCode\\(\\)\n"
      "    @ 0x[0-9a-f]+  pstrain::.*CallerOfTheCrash\\(\\)\n"
      ".*\\*\\*\\* SIGSEGV received at time=");
}

TEST(CrashHandlerDeathTest, SigtermKeepsTheDispositionItHad) {
  EXPECT_EXIT(
      {
        std::signal(SIGTERM, SIG_IGN);
        InstallCrashHandler("/proc/self/exe");
        std::raise(SIGTERM);  // ignored, as before the handler
        std::exit(7);
      },
      ::testing::ExitedWithCode(7), "");
}

}  // namespace
}  // namespace pstrain
