// Prints a crash report to stderr (the task's log) when the process dies of
// SIGSEGV, SIGILL, SIGFPE, SIGABRT, SIGBUS or SIGTRAP, then dies of the same
// signal as it would have. The report has two parts: the stack of the
// crashing thread, innermost frame first, unwound through the frame tables
// (libgcc's unwinder, which steps over the signal frame and through
// libraries built without frame pointers) and symbolized from the binary;
// then Abseil's failure signal handler's report (signal, time, CPU, PC).
// SIGTERM keeps the disposition it had (the roles stop cleanly on it,
// base/signals.h). Call once, first thing in main.
#ifndef PSTRAIN_BASE_CRASH_HANDLER_H_
#define PSTRAIN_BASE_CRASH_HANDLER_H_

namespace pstrain {

void InstallCrashHandler(const char* argv0);

}  // namespace pstrain

#endif  // PSTRAIN_BASE_CRASH_HANDLER_H_
