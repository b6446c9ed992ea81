// ThreadSanitizer annotations for Debian's Abseil synchronization library.
//
// Debian ships Abseil compiled without -fsanitize=thread, so TSan does not
// see the happens-before edges its Mutex, CondVar, Notification and
// BlockingCounter create, and would report every access they guard as a
// race. Under --config=tsan this file defines those entry points in the
// test binary itself: each calls the library's own through dlsym(RTLD_NEXT)
// and tells TSan what it did (acquire after locking or waking, release
// before unlocking or signalling), the annotations Abseil itself makes when
// it is built with TSan. Reads made while the library runs (it evaluates
// Condition callbacks, which read guarded state under the lock, on whichever
// thread releases the mutex) are not recorded: they happen under the lock
// but between the annotations. Outside a TSan build this file is empty.
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PSTRAIN_TSAN_BUILD 1
#endif
#endif

#ifdef PSTRAIN_TSAN_BUILD

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

extern "C" {
void __tsan_acquire(void* addr);
void __tsan_release(void* addr);
void AnnotateIgnoreReadsBegin(const char* file, int line);
void AnnotateIgnoreReadsEnd(const char* file, int line);
}

namespace {

// The library's definition of `mangled`; aborts, naming it, if missing.
void* Real(const char* mangled) {
  void* f = dlsym(RTLD_NEXT, mangled);
  if (f == nullptr) {
    std::fprintf(stderr, "tsan_absl: %s not found in the Abseil library\n", mangled);
    std::abort();
  }
  return f;
}

// Calls the library while not recording reads (see the file comment).
struct IgnoreReads {
  IgnoreReads() { AnnotateIgnoreReadsBegin(__FILE__, __LINE__); }
  ~IgnoreReads() { AnnotateIgnoreReadsEnd(__FILE__, __LINE__); }
};

#define PSTRAIN_REAL(type, mangled) \
  static const auto real = reinterpret_cast<type>(Real(mangled))

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

void Mutex::Lock() {
  PSTRAIN_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex4LockEv");
  {
    IgnoreReads ignore;
    real(this);
  }
  __tsan_acquire(this);
}

void Mutex::ReaderLock() {
  PSTRAIN_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex10ReaderLockEv");
  {
    IgnoreReads ignore;
    real(this);
  }
  __tsan_acquire(this);
}

bool Mutex::TryLock() {
  PSTRAIN_REAL(bool (*)(Mutex*), "_ZN4absl7debian35Mutex7TryLockEv");
  const bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

bool Mutex::ReaderTryLock() {
  PSTRAIN_REAL(bool (*)(Mutex*), "_ZN4absl7debian35Mutex13ReaderTryLockEv");
  const bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

void Mutex::Unlock() {
  PSTRAIN_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex6UnlockEv");
  __tsan_release(this);
  IgnoreReads ignore;
  real(this);
}

void Mutex::ReaderUnlock() {
  PSTRAIN_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex12ReaderUnlockEv");
  __tsan_release(this);
  IgnoreReads ignore;
  real(this);
}

void Mutex::LockWhen(const Condition& cond) {
  PSTRAIN_REAL(void (*)(Mutex*, const Condition&),
               "_ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE");
  {
    IgnoreReads ignore;
    real(this, cond);
  }
  __tsan_acquire(this);
}

bool Mutex::LockWhenWithTimeout(const Condition& cond, absl::Duration timeout) {
  PSTRAIN_REAL(bool (*)(Mutex*, const Condition&, absl::Duration),
               "_ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  bool result;
  {
    IgnoreReads ignore;
    result = real(this, cond, timeout);
  }
  __tsan_acquire(this);
  return result;
}

void Mutex::Await(const Condition& cond) {
  PSTRAIN_REAL(void (*)(Mutex*, const Condition&),
               "_ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE");
  __tsan_release(this);
  {
    IgnoreReads ignore;
    real(this, cond);
  }
  __tsan_acquire(this);
}

bool Mutex::AwaitWithTimeout(const Condition& cond, absl::Duration timeout) {
  PSTRAIN_REAL(bool (*)(Mutex*, const Condition&, absl::Duration),
               "_ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  __tsan_release(this);
  bool result;
  {
    IgnoreReads ignore;
    result = real(this, cond, timeout);
  }
  __tsan_acquire(this);
  return result;
}

bool Mutex::AwaitWithDeadline(const Condition& cond, absl::Time deadline) {
  PSTRAIN_REAL(bool (*)(Mutex*, const Condition&, absl::Time),
               "_ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  __tsan_release(this);
  bool result;
  {
    IgnoreReads ignore;
    result = real(this, cond, deadline);
  }
  __tsan_acquire(this);
  return result;
}

void CondVar::Wait(Mutex* mu) {
  PSTRAIN_REAL(void (*)(CondVar*, Mutex*), "_ZN4absl7debian37CondVar4WaitEPNS0_5MutexE");
  __tsan_release(mu);
  {
    IgnoreReads ignore;
    real(this, mu);
  }
  __tsan_acquire(this);
  __tsan_acquire(mu);
}

bool CondVar::WaitWithTimeout(Mutex* mu, absl::Duration timeout) {
  PSTRAIN_REAL(bool (*)(CondVar*, Mutex*, absl::Duration),
               "_ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  __tsan_release(mu);
  bool result;
  {
    IgnoreReads ignore;
    result = real(this, mu, timeout);
  }
  __tsan_acquire(this);
  __tsan_acquire(mu);
  return result;
}

void CondVar::Signal() {
  PSTRAIN_REAL(void (*)(CondVar*), "_ZN4absl7debian37CondVar6SignalEv");
  __tsan_release(this);
  real(this);
}

void CondVar::SignalAll() {
  PSTRAIN_REAL(void (*)(CondVar*), "_ZN4absl7debian37CondVar9SignalAllEv");
  __tsan_release(this);
  real(this);
}

void Notification::Notify() {
  PSTRAIN_REAL(void (*)(Notification*), "_ZN4absl7debian312Notification6NotifyEv");
  __tsan_release(this);
  IgnoreReads ignore;
  real(this);
}

void Notification::WaitForNotification() const {
  PSTRAIN_REAL(void (*)(const Notification*),
               "_ZNK4absl7debian312Notification19WaitForNotificationEv");
  {
    IgnoreReads ignore;
    real(this);
  }
  __tsan_acquire(const_cast<Notification*>(this));
}

bool Notification::WaitForNotificationWithTimeout(absl::Duration timeout) const {
  PSTRAIN_REAL(bool (*)(const Notification*, absl::Duration),
               "_ZNK4absl7debian312Notification30WaitForNotificationWithTimeoutENS0_8DurationE");
  bool notified;
  {
    IgnoreReads ignore;
    notified = real(this, timeout);
  }
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

bool BlockingCounter::DecrementCount() {
  PSTRAIN_REAL(bool (*)(BlockingCounter*), "_ZN4absl7debian315BlockingCounter14DecrementCountEv");
  __tsan_release(this);
  IgnoreReads ignore;
  return real(this);
}

void BlockingCounter::Wait() {
  PSTRAIN_REAL(void (*)(BlockingCounter*), "_ZN4absl7debian315BlockingCounter4WaitEv");
  {
    IgnoreReads ignore;
    real(this);
  }
  __tsan_acquire(this);
}

ABSL_NAMESPACE_END
}  // namespace absl

namespace {

// Abseil's deadlock detector keeps one graph of every Mutex, guarded by a
// spin lock of the library's that TSan cannot see, so two threads that
// destroy mutexes at once (each removing its node) read as a race. TSan
// checks lock order itself ("lock-order-inversion"), so the detector is
// turned off in its builds.
const bool kDetectorOff = [] {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return true;
}();

}  // namespace

#endif  // PSTRAIN_TSAN_BUILD
