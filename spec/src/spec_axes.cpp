// io.axes (positions "axes"): the position axes of a vision tower's or diffusion transformer's
// RoPE (docs/spec.md, docs/multi-axis-rope.md): validation, canonical form, and which axis and
// index within it each rotary pair has.
#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/core.h>

#include "spec_reader.h"

namespace ropejit {

int position_streams(const Spec& spec) {
  switch (spec.io.positions) {
    case PositionsForm::mrope: return 3;
    case PositionsForm::axes: return static_cast<int>(spec.io.axes.pairs.size());
    default: return 1;
  }
}

bool per_pair_positions(const Spec& spec) {
  return spec.io.positions == PositionsForm::mrope || spec.io.positions == PositionsForm::axes;
}

PairAxis pair_axis(const AxesSpec& axes, int pair) {
  const int count = static_cast<int>(axes.pairs.size());
  if (axes.placement == AxisPlacement::alternating) return {pair % count, pair / count};
  int first = 0;
  for (int a = 0; a < count; ++a) {
    if (pair < first + axes.pairs[a]) return {a, pair - first};
    first += axes.pairs[a];
  }
  throw Error(Status::internal, fmt::format("pair {} lies past the axes' {} pairs", pair, first));
}

namespace spec_detail {

namespace {

constexpr std::string_view kAxesKeys[] = {"pairs", "theta", "frequencies", "placement"};

// pairs: 1 to kMaxAxes counts >= 1 summing to rotary_dim / 2.
std::vector<int> read_pairs(const json* pairs, const std::string& base, int rotary_dim, Reader& reader) {
  const int half = rotary_dim / 2;
  const std::string must = fmt::format("a list of 1 to {} integers >= 1 (rotary pairs per axis) summing to "
                                       "rotary_dim / 2 = {}", kMaxAxes, half);
  if (!pairs) {
    reader.add(base + "/pairs", "missing: io.axes needs it (" + must + ")");
    return {};
  }
  if (!pairs->is_array() || pairs->empty() || pairs->size() > static_cast<size_t>(kMaxAxes)) {
    reader.not_allowed(base + "/pairs", *pairs, must);
    return {};
  }
  std::vector<int> counts;
  for (size_t i = 0; i < pairs->size(); ++i)
    if (auto n = reader.integer((*pairs)[i], fmt::format("{}/pairs/{}", base, i), 1, kMaxHeadDim))
      counts.push_back(static_cast<int>(*n));
  if (counts.size() != pairs->size()) return {};
  if (half > 0 && std::accumulate(counts.begin(), counts.end(), 0) != half) {
    reader.not_allowed(base + "/pairs", *pairs, must);
    return {};
  }
  return counts;
}

}  // namespace

void read_axes(const json* io_block, Reader& reader, Spec& spec) {
  const std::string base = "/io/axes";
  const json* block = io_block && io_block->is_object() ? member(*io_block, "axes") : nullptr;
  AxesSpec& axes = spec.io.axes;
  if (spec.io.positions != PositionsForm::axes) {
    if (block) reader.not_allowed(base, *block, "absent unless io.positions is \"axes\"");
    return;
  }
  if (!block) {
    reader.add(base, "missing: io.positions \"axes\" needs it (an object with pairs, and optionally theta, "
                     "frequencies, placement)");
    return;
  }
  if (!block->is_object()) {
    reader.not_allowed(base, *block, "an object with pairs, and optionally theta, frequencies, placement");
    return;
  }
  reader.check_keys(*block, base, std::vector<std::string_view>(std::begin(kAxesKeys), std::end(kAxesKeys)));
  axes.pairs = read_pairs(member(*block, "pairs"), base, spec.rotary_dim, reader);
  if (auto v = reader.enum_field<AxisFrequencies>(*block, base, "frequencies", Reader::Presence::optional))
    axes.frequencies = *v;
  if (auto v = reader.enum_field<AxisPlacement>(*block, base, "placement", Reader::Presence::optional)) axes.placement = *v;
  const bool caller = spec.io.angles == AnglesSource::cos_sin_cache;
  // Each axis's table is a default RoPE table: a scaling would need a run length per axis.
  if (!caller && spec.rope.type != RopeType::default_)
    reader.not_allowed("/rope/rope_type", std::string(to_string(spec.rope.type)),
                       "\"default\" with io.positions \"axes\" (each axis's frequencies are a default RoPE table over "
                       "its pairs; a per-axis base goes in io.axes.theta)");
  if (axes.pairs.empty()) return;
  const size_t count = axes.pairs.size();
  const bool equal = std::all_of(axes.pairs.begin(), axes.pairs.end(), [&](int n) { return n == axes.pairs[0]; });
  if (!equal && (axes.placement == AxisPlacement::alternating || axes.frequencies == AxisFrequencies::global_alternate))
    reader.not_allowed(base + "/pairs", block->at("pairs"),
                       fmt::format("equal counts with {} (axis a takes every {}-th pair or frequency)",
                                   axes.placement == AxisPlacement::alternating ? "placement \"alternating\""
                                                                                : "frequencies \"global_alternate\"",
                                   count));
  if (const json* theta = member(*block, "theta")) {
    if (caller)
      reader.not_allowed(base + "/theta", *theta, "absent with io.angles \"cos_sin_cache\" (the caller's cache holds "
                                                  "the angles)");
    else if (axes.frequencies == AxisFrequencies::global_alternate)
      reader.not_allowed(base + "/theta", *theta, "absent with frequencies \"global_alternate\" (one table, of "
                                                  "rope.rope_theta)");
    else if (!theta->is_array() || theta->size() != count)
      reader.not_allowed(base + "/theta", *theta, fmt::format("a list of {} numbers > 0 (one base per axis)", count));
    else if (auto values = reader.number_list(*theta, base + "/theta", 0.0, true))
      axes.theta = *values;
  }
  // Canonical: every own-frequency axis names its base.
  if (!caller && axes.frequencies == AxisFrequencies::own && axes.theta.empty())
    axes.theta.assign(count, spec.rope.theta);
}

void write_axes(const Spec& spec, nlohmann::ordered_json& io) {
  const AxesSpec& axes = spec.io.axes;
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  out["pairs"] = axes.pairs;
  if (!axes.theta.empty()) out["theta"] = axes.theta;
  out["frequencies"] = std::string(to_string(axes.frequencies));
  out["placement"] = std::string(to_string(axes.placement));
  io["axes"] = std::move(out);
}

}  // namespace spec_detail
}  // namespace ropejit
