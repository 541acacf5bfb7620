#pragma once
// Execution contexts for the host backend's cooperative launches: a fiber is a stack and a
// saved stack pointer, switched by a few instructions that save the callee-saved registers
// (x86-64), instead of glibc's swapcontext, whose signal-mask system call on every switch
// made a collective cost about 0.4 us per thread. Elsewhere, and where the process runs with
// a hardware shadow stack (which a plain stack switch would break), ucontext does the work.
#include <ucontext.h>

#include <cstddef>

namespace ropejit {

/// A suspended execution context, resumed by fiber_switch.
struct FiberContext {
  void* stack_pointer = nullptr;  ///< saved by the fast switch
  ucontext_t context;             ///< the ucontext path's state
  const void* stack_bottom = nullptr;  ///< lowest address of its stack (null: the OS thread's)
  std::size_t stack_size = 0;          ///< for AddressSanitizer's fiber annotations
};

/// Prepares `fiber` to run `entry()` on [stack, stack + size) at its first resume; `entry`
/// must start with fiber_started() and never return (it switches away for the last time).
void fiber_prepare(FiberContext& fiber, char* stack, std::size_t size, void (*entry)());

/// Saves the caller into `from` and resumes `to`; returns when something resumes `from`.
/// `from_ends`: the caller is never resumed again (its stack may be reused).
void fiber_switch(FiberContext& from, FiberContext& to, bool from_ends = false);

/// First call of a fiber's entry: records the context that started it (its stack, for the
/// sanitizer) in `scheduler`.
void fiber_started(FiberContext& scheduler);

/// Whether switches take the fast path (false: ucontext). Tests force the ucontext path to
/// cover it; the process-wide default is the fast path where it is safe.
bool fiber_fast_switch();
/// Overrides the choice above (tests only); returns the previous choice.
bool set_fiber_fast_switch(bool fast);

}  // namespace ropejit
