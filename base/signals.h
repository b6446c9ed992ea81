// Turns SIGINT and SIGTERM into a callback on a dedicated thread, so a main
// can stop its servers cleanly instead of dying mid-write.
#ifndef PSTRAIN_BASE_SIGNALS_H_
#define PSTRAIN_BASE_SIGNALS_H_

#include <functional>

namespace pstrain {

// Installs handlers for SIGINT and SIGTERM and starts a detached thread that
// calls `on_signal` with the signal number each time one arrives (the
// handler only writes the number to a pipe). Call once, from main.
// `on_signal` runs on that thread; it must be thread-safe.
void WatchStopSignals(std::function<void(int signo)> on_signal);

}  // namespace pstrain

#endif  // PSTRAIN_BASE_SIGNALS_H_
