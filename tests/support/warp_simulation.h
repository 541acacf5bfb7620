#pragma once
// CUDA's warp shuffles and votes simulated from the Programming Guide's definitions ("Warp Shuffle
// Functions", "Warp Vote Functions": segments of `width` lanes), not from the host runtime's PTX
// formulas: the expected values of the host backend's collective tests.
#include <optional>
#include <vector>

namespace ropejit::test {

enum class Shuffle { idx, up, down, bfly };

/// The lane `lane` reads: its segment is the `width` lanes holding it; up/down past the
/// segment and xor into a later segment return the caller's own value.
inline unsigned shuffle_source(Shuffle op, unsigned lane, int operand, unsigned width) {
  const unsigned first = lane / width * width;
  switch (op) {
    case Shuffle::idx:
      return first + static_cast<unsigned>(((operand % static_cast<int>(width)) + static_cast<int>(width)) %
                                           static_cast<int>(width));
    case Shuffle::up:
      return static_cast<int>(lane) - operand < static_cast<int>(first) ? lane : lane - operand;
    case Shuffle::down:
      return lane + operand >= first + width ? lane : lane + operand;
    case Shuffle::bfly: {
      const unsigned partner = lane ^ static_cast<unsigned>(operand);
      return partner >= first + width ? lane : partner;
    }
  }
  return lane;
}

/// A shuffled value, or nothing when the source lane is not in `mask` (CUDA: undefined).
template <typename Value>
std::optional<Value> shuffled(Shuffle op, const std::vector<Value>& warp, unsigned mask,
                              unsigned lane, int operand, unsigned width = 32) {
  const unsigned source = shuffle_source(op, lane, operand, width);
  if (!(mask >> source & 1u)) return std::nullopt;
  return warp[source];
}

/// The __ballot_sync of `predicate` (one per lane of the warp) over the lanes of `mask`.
inline unsigned ballot(const std::vector<bool>& predicate, unsigned mask) {
  unsigned bits = 0;
  for (unsigned lane = 0; lane < predicate.size(); ++lane)
    if (mask >> lane & 1u && predicate[lane]) bits |= 1u << lane;
  return bits;
}

}  // namespace ropejit::test
