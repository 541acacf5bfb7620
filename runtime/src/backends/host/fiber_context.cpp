// Fiber switching for cooperative host launches (fiber_context.h).
#include "backends/host/fiber_context.h"

#include <atomic>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#define ROPEJIT_FAST_FIBERS 1
#else
#define ROPEJIT_FAST_FIBERS 0
#endif

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ROPEJIT_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define ROPEJIT_ASAN 1
#endif
#ifdef ROPEJIT_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#if ROPEJIT_FAST_FIBERS
// Saves the callee-saved registers, MXCSR and the x87 control word (the SysV ABI's preserved
// state) on the current stack, stores its pointer in *save, and pops the same from `load`.
extern "C" void ropejit_fiber_swap(void** save, void* load);
asm(R"(
  .text
  .p2align 4
  .globl ropejit_fiber_swap
  .hidden ropejit_fiber_swap
  .type ropejit_fiber_swap, @function
ropejit_fiber_swap:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size ropejit_fiber_swap, .-ropejit_fiber_swap
)");
#endif

namespace ropejit {
namespace {

// A process with a hardware shadow stack (glibc 2.39+ may enable it) would fault on the plain
// stack switch: ucontext switches the shadow stack too.
bool shadow_stack_active() {
#if ROPEJIT_FAST_FIBERS
  constexpr int kArchShstkStatus = 0x5005;
  unsigned long features = 0;
  if (syscall(SYS_arch_prctl, kArchShstkStatus, &features) != 0) return false;
  return (features & 1ul) != 0;
#else
  return false;
#endif
}

std::atomic<bool>& fast_switch_flag() {
  static std::atomic<bool> fast{ROPEJIT_FAST_FIBERS && !shadow_stack_active()};
  return fast;
}

}  // namespace

bool fiber_fast_switch() { return fast_switch_flag().load(std::memory_order_relaxed); }

bool set_fiber_fast_switch(bool fast) {
  return fast_switch_flag().exchange(fast && ROPEJIT_FAST_FIBERS && !shadow_stack_active());
}

void fiber_prepare(FiberContext& fiber, char* stack, std::size_t size, void (*entry)()) {
#ifdef ROPEJIT_ASAN
  ASAN_UNPOISON_MEMORY_REGION(stack, size);  // frames a failed fiber abandoned stay poisoned
#endif
  fiber.stack_bottom = stack;
  fiber.stack_size = size;
#if ROPEJIT_FAST_FIBERS
  if (fiber_fast_switch()) {
    // The frame ropejit_fiber_swap pops: control words, six registers, `entry` as the return
    // address, then a null return address for `entry` (which never returns). At entry the
    // stack pointer is 8 mod 16, as after a call.
    const std::uintptr_t top = (reinterpret_cast<std::uintptr_t>(stack) + size) & ~std::uintptr_t{15};
    auto* frame = reinterpret_cast<std::uint64_t*>(top - 72);
    std::uint32_t control[2];
    asm volatile("stmxcsr %0" : "=m"(control[0]));
    asm volatile("fnstcw %0" : "=m"(control[1]));
    std::memcpy(&frame[0], control, sizeof control);
    for (int i = 1; i <= 6; ++i) frame[i] = 0;
    frame[7] = reinterpret_cast<std::uint64_t>(entry);
    frame[8] = 0;
    fiber.stack_pointer = frame;
    return;
  }
#endif
  getcontext(&fiber.context);
  fiber.context.uc_stack.ss_sp = stack;
  fiber.context.uc_stack.ss_size = size;
  fiber.context.uc_link = nullptr;
  makecontext(&fiber.context, entry, 0);
}

void fiber_switch(FiberContext& from, FiberContext& to, bool from_ends) {
#ifdef ROPEJIT_ASAN
  void* fake_stack = nullptr;
  __sanitizer_start_switch_fiber(from_ends ? nullptr : &fake_stack, to.stack_bottom, to.stack_size);
#else
  (void)from_ends;
#endif
#if ROPEJIT_FAST_FIBERS
  if (fiber_fast_switch()) ropejit_fiber_swap(&from.stack_pointer, to.stack_pointer);
  else swapcontext(&from.context, &to.context);
#else
  swapcontext(&from.context, &to.context);
#endif
#ifdef ROPEJIT_ASAN
  __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#endif
}

void fiber_started(FiberContext& scheduler) {
#ifdef ROPEJIT_ASAN
  const void* bottom = nullptr;
  std::size_t size = 0;
  __sanitizer_finish_switch_fiber(nullptr, &bottom, &size);
  scheduler.stack_bottom = bottom;
  scheduler.stack_size = size;
#else
  (void)scheduler;
#endif
}

}  // namespace ropejit
