// `ropejit freqs spec.json [--json] [--mode hf_fp32|float64] [--length L]`: the per-pair
// frequency table of a spec (inv_freq, wavelength) plus the yarn/llama3/longrope/dynamic facts.
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "command_registry.h"
#include "ropejit/error.h"
#include "ropejit/freqs.h"
#include "ropejit/spec.h"

namespace {

using ropejit::FreqMode;
using ropejit::FreqTable;
using ropejit::RopeType;
using ropejit::Spec;

constexpr double kTwoPi = 6.28318530717958647692;

struct FreqsOptions {
  std::string spec_path;
  bool json = false;
  std::string mode = "hf_fp32";
  std::optional<int64_t> length;
};

/// Everything the command reports, computed once for both output forms.
struct FreqsReport {
  Spec spec;
  FreqMode mode = FreqMode::hf_fp32;
  FreqTable table;
  std::optional<int64_t> length;
  std::optional<double> dynamic_base;       ///< dynamic: b' at --length
  std::optional<bool> longrope_long;        ///< longrope with --length: the long table applies
};

FreqsReport build_report(const FreqsOptions& options) {
  FreqsReport report;
  report.spec = ropejit::load_spec_file(options.spec_path);
  report.mode = ropejit::cli::enum_option<FreqMode>("--mode", options.mode).value_or(FreqMode::hf_fp32);
  report.length = options.length;
  if (caller_cos_sin(report.spec))  // a table of ropejit's own would be none the launches use
    throw ropejit::Error(ropejit::Status::invalid_argument,
                         fmt::format("{}: io.angles cos_sin_cache is not allowed: its cos/sin come from the caller's "
                                     "cache, so ropejit has no frequency table for it (must be io.angles computed)",
                                     options.spec_path));
  if (options.length && *options.length < 1)
    throw ropejit::Error(ropejit::Status::invalid_argument,
                         fmt::format("--length: {} is not allowed: must be >= 1", *options.length));
  const RopeType type = report.spec.rope.type;
  if (options.length && type == RopeType::dynamic) {
    report.table = ropejit::compute_freqs_dynamic(report.spec, *options.length, report.mode);
    report.dynamic_base = ropejit::dynamic_ntk_base(report.spec, *options.length);
  } else {
    report.table = ropejit::compute_freqs(report.spec, report.mode);
  }
  if (options.length && type == RopeType::longrope)
    report.longrope_long = ropejit::longrope_uses_long(report.spec, *options.length);
  return report;
}

/// The table that applies: longrope with --length picks short or long.
const std::vector<double>& active_table(const FreqsReport& r) {
  if (r.longrope_long && *r.longrope_long) return r.table.inv_freq_long;
  return r.table.inv_freq;
}

/// Both longrope tables are shown when no length picks one.
bool show_both_tables(const FreqsReport& r) {
  return r.spec.rope.type == RopeType::longrope && !r.longrope_long;
}

void print_json(const FreqsReport& r) {
  nlohmann::json out;
  out["name"] = r.spec.name;
  out["rope_type"] = std::string(ropejit::to_string(r.spec.rope.type));
  out["rotary_dim"] = r.table.rotary_dim;
  out["mode"] = std::string(ropejit::to_string(r.mode));
  const bool long_table = r.longrope_long && *r.longrope_long;
  out["attention_factor"] = long_table ? r.table.attention_factor_long : r.table.attention_factor;
  if (show_both_tables(r) && r.table.attention_factor_long != r.table.attention_factor)
    out["attention_factor_long"] = r.table.attention_factor_long;  // PhiMoE's long_mscale
  if (r.length) out["length"] = *r.length;
  if (r.dynamic_base) out["dynamic_base"] = *r.dynamic_base;
  if (r.longrope_long) out["longrope_table"] = *r.longrope_long ? "long" : "short";
  if (r.table.yarn_low) {
    out["yarn"] = {{"low", *r.table.yarn_low}, {"high", *r.table.yarn_high}};
    if (r.table.yarn_attention_softmax_scale)
      out["yarn"]["attention_softmax_scale"] = *r.table.yarn_attention_softmax_scale;
  }
  if (r.table.llama3_counts) {
    const auto& c = *r.table.llama3_counts;
    out["llama3_counts"] = {{"unchanged", c[0]}, {"smoothed", c[1]}, {"divided", c[2]}};
  }
  if (r.table.rotated_pairs < r.table.rotary_dim / 2) out["rotated_pairs"] = r.table.rotated_pairs;
  nlohmann::json pairs = nlohmann::json::array();
  const auto& inv = active_table(r);
  for (size_t i = 0; i < inv.size(); ++i) {
    nlohmann::json pair = {{"index", i}, {"inv_freq", inv[i]}, {"wavelength", kTwoPi / inv[i]}};
    if (show_both_tables(r)) {
      pair["inv_freq_long"] = r.table.inv_freq_long[i];
      pair["wavelength_long"] = kTwoPi / r.table.inv_freq_long[i];
    }
    pairs.push_back(std::move(pair));
  }
  out["pairs"] = std::move(pairs);
  fmt::print("{}\n", out.dump(2));
}

void print_text(const FreqsReport& r) {
  // float32 values need 9 significant digits to round-trip, doubles 17.
  const int digits = r.mode == FreqMode::hf_fp32 ? 9 : 17;
  const int width = digits + 8;
  fmt::print("spec {}  rope_type {}  rotary_dim {}  mode {}\n", r.spec.name,
             ropejit::to_string(r.spec.rope.type), r.table.rotary_dim, ropejit::to_string(r.mode));
  const bool long_table = r.longrope_long && *r.longrope_long;
  fmt::print("attention_factor {:.17g}\n", long_table ? r.table.attention_factor_long : r.table.attention_factor);
  if (show_both_tables(r) && r.table.attention_factor_long != r.table.attention_factor)
    fmt::print("attention_factor_long {:.17g}\n", r.table.attention_factor_long);
  if (r.table.yarn_low) {
    fmt::print("yarn low {:.17g}  high {:.17g}", *r.table.yarn_low, *r.table.yarn_high);
    if (r.table.yarn_attention_softmax_scale)
      fmt::print("  attention softmax scale {:.17g} (reported, not applied)",
                 *r.table.yarn_attention_softmax_scale);
    fmt::print("\n");
  }
  if (r.table.llama3_counts) {
    const auto& c = *r.table.llama3_counts;
    fmt::print("llama3 {} unchanged, {} smoothed, {} divided\n", c[0], c[1], c[2]);
  }
  if (r.table.rotated_pairs < r.table.rotary_dim / 2)
    fmt::print("{} of {} pairs rotated (the others: inv_freq 0, kept as they are)\n", r.table.rotated_pairs,
               r.table.rotary_dim / 2);
  if (r.dynamic_base) fmt::print("dynamic length {}  base {:.17g}\n", *r.length, *r.dynamic_base);
  if (r.longrope_long)
    fmt::print("longrope length {}  {} table\n", *r.length, *r.longrope_long ? "long" : "short");
  const auto& inv = active_table(r);
  const bool both = show_both_tables(r);
  fmt::print("{:>5} {:>{}} {:>{}}", "index", both ? "inv_freq_short" : "inv_freq", width,
             both ? "wavelength_short" : "wavelength", width);
  if (both) fmt::print(" {:>{}} {:>{}}", "inv_freq_long", width, "wavelength_long", width);
  fmt::print("\n");
  for (size_t i = 0; i < inv.size(); ++i) {
    fmt::print("{:>5} {:>{}.{}g} {:>{}.{}g}", i, inv[i], width, digits, kTwoPi / inv[i], width,
               digits);
    if (both) {
      const double long_inv = r.table.inv_freq_long[i];
      fmt::print(" {:>{}.{}g} {:>{}.{}g}", long_inv, width, digits, kTwoPi / long_inv, width,
                 digits);
    }
    fmt::print("\n");
  }
}

void add_freqs_command(CLI::App& app) {
  auto options = std::make_shared<FreqsOptions>();
  auto* cmd = app.add_subcommand(
      "freqs", "Print a spec's per-pair frequency table (inv_freq, wavelength) and scaling facts");
  cmd->add_option("spec", options->spec_path, "Spec JSON file")->required();
  cmd->add_flag("--json", options->json, "Machine-readable JSON output");
  std::vector<std::string> modes;
  for (const auto& row : ropejit::kFreqModeNames) modes.emplace_back(row.name);
  cmd->add_option("--mode", options->mode,
                  "hf_fp32: float32 as HF evaluates it (what kernels bake); float64: in double")
      ->check(CLI::IsMember(modes))
      ->capture_default_str();
  cmd->add_option("--length", options->length,
                  "Run-time length L = max(position)+1: dynamic NTK table, LongRoPE table choice");
  cmd->callback([options] {
    const FreqsReport report = build_report(*options);
    if (options->json) print_json(report);
    else print_text(report);
  });
}

}  // namespace

ROPEJIT_COMMAND(30, add_freqs_command);
