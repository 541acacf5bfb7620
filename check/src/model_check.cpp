// Recorded GPU measurements against the calibrated static model (model_check.h).
#include "ropejit/check/model_check.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ropejit/json_fields.h"

namespace ropejit::check {

namespace {

constexpr const char* kTimings[] = {"kernel", "graph", "event"};

LaunchTiming timing_from(JsonFields& f, const nlohmann::json& row, const std::string& at) {
  const std::string text = f.string_field(row, at, "timing").value_or("");
  for (int i = 0; i < 3; ++i)
    if (text == kTimings[i]) return static_cast<LaunchTiming>(i);
  f.not_allowed(at + "/timing", text, "one of kernel | graph | event");
  return LaunchTiming::kernel;
}

// The static figures the model reads, as `ropejit compile --stats --json` names them.
KernelStats kernel_from(JsonFields& f, const nlohmann::json& k, const std::string& at) {
  KernelStats s;
  s.arch = f.string_field(k, at, "arch").value_or("");
  s.registers = static_cast<int>(f.integer_field(k, at, "registers", 1, 255).value_or(0));
  s.shared_bytes = static_cast<int>(f.integer_field(k, at, "shared_bytes", 0, 1 << 20).value_or(0));
  s.block_threads = static_cast<int>(f.integer_field(k, at, "block_threads", 32, 1024).value_or(0));
  s.items_per_row = static_cast<int>(f.integer_field(k, at, "items_per_row", 1, 1 << 20).value_or(0));
  s.serial_trips = static_cast<int>(f.integer_field(k, at, "serial_trips", 1, 4096).value_or(1));
  s.counts.per_item = f.number_field(k, at, "instructions_per_item", 0, true).value_or(0);
  s.counts.bytes_in_flight = static_cast<int>(f.integer_field(k, at, "bytes_in_flight", 1, 1 << 16).value_or(0));
  s.counts.fp64_arith_per_item = f.number_field(k, at, "fp64_arith_per_item", 0, false).value_or(0);
  s.counts.fp64_convert_per_item = f.number_field(k, at, "fp64_convert_per_item", 0, false).value_or(0);
  if (const nlohmann::json* early = f.member(k, at, "data_load_before_index_use", JsonFields::Presence::optional))
    s.counts.data_load_before_index_use = f.boolean(*early, at + "/data_load_before_index_use").value_or(false);
  s.occupancy = occupancy(arch_limits(s.arch), s.block_threads, s.registers, s.shared_bytes);
  return s;
}

// The kernel's second reads as it ran (they depend on its code, not only on the spec): a row's
// bytes read again and an item's bytes between its two reads; absent: as today's code reads.
void rereads_from(JsonFields& f, const nlohmann::json& k, const std::string& at, MeasuredLaunch& r) {
  constexpr auto optional = JsonFields::Presence::optional;
  r.reread_per_row = f.integer_field(k, at, "reread_bytes_per_row", 0, int64_t(1) << 40, optional).value_or(-1);
  r.reread_distance = f.integer_field(k, at, "reread_distance", 0, int64_t(1) << 40, optional).value_or(-1);
}

}  // namespace

Measurements load_measurements(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(Status::io_error, fmt::format("cannot read measurements file {}", path));
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw Error(Status::invalid_argument, fmt::format("{}: not JSON", path));
  JsonFields f(Status::invalid_argument, path + ": ");
  f.integer_field(j, "", "format", 1, 1);
  Measurements m;
  m.part = f.string_field(j, "", "part").value_or("");
  find_gpu_part(m.part);  // a part the model knows
  m.device = f.string_field(j, "", "device").value_or("");
  m.date = f.string_field(j, "", "date").value_or("");
  m.commit = f.string_field(j, "", "commit").value_or("");
  m.source = f.string_field(j, "", "source").value_or("");
  const nlohmann::json* rows = f.member(j, "", "rows");
  if (!rows->is_array() || rows->empty()) f.not_allowed("/rows", *rows, "a non-empty list of measured launches");
  for (size_t i = 0; i < rows->size(); ++i) {
    const nlohmann::json& row = (*rows)[i];
    const std::string at = fmt::format("/rows/{}", i);
    MeasuredLaunch r;
    r.label = f.string_field(row, at, "label").value_or("");
    r.spec = f.string_field(row, at, "spec").value_or("");
    r.dtype = f.string_field(row, at, "dtype").value_or("");
    r.tokens = f.integer_field(row, at, "tokens", 1, int64_t(1) << 40).value_or(1);
    r.batch = static_cast<int>(f.integer_field(row, at, "batch", 1, 1 << 20, JsonFields::Presence::optional).value_or(1));
    r.timing = timing_from(f, row, at);
    const std::string inputs = f.string_field(row, at, "inputs", JsonFields::Presence::optional).value_or("dram");
    if (inputs != "dram" && inputs != "l2") f.not_allowed(at + "/inputs", inputs, "one of dram | l2");
    r.inputs_in_l2 = inputs == "l2";
    r.us = f.number_field(row, at, "us", 0, true).value_or(1);
    r.band = f.number_field(row, at, "band", 0, true, JsonFields::Presence::optional).value_or(0.15);
    const nlohmann::json* kernel = f.member(row, at, "kernel");
    r.config = config_from_json(f.member(*kernel, at + "/kernel", "config")->dump());
    r.stats = kernel_from(f, *kernel, at + "/kernel");
    rereads_from(f, *kernel, at + "/kernel", r);
    m.rows.push_back(std::move(r));
  }
  return m;
}

std::vector<ModelRow> model_rows(const Measurements& m, const std::string& specs_dir, bool current_kernels) {
  const GpuPart& part = find_gpu_part(m.part);
  std::vector<ModelRow> out;
  for (const MeasuredLaunch& measured : m.rows) {
    std::ifstream in(fmt::format("{}/{}.json", specs_dir, measured.spec));
    if (!in)
      throw Error(Status::io_error, fmt::format("no spec {}/{}.json for row {}", specs_dir, measured.spec, measured.label));
    std::stringstream text;
    text << in.rdbuf();
    nlohmann::json j = nlohmann::json::parse(text.str());
    j["dtype"] = measured.dtype;
    const Spec spec = parse_spec(j.dump());
    ModelRow row;
    row.measured = measured;
    if (current_kernels) {  // today's default kernel for the part's arch, compiled and read now
      row.measured.config = default_config(spec, measured.tokens);  // as a GPU runtime picks it
      const Source source = generate_source(make_plan(spec, row.measured.config));
      row.measured.stats = kernel_stats(spec, row.measured.config, source, compile_nvrtc(source, part.arch));
    }
    LaunchShape shape;
    shape.tokens = measured.tokens;
    shape.batch = measured.batch;
    shape.max_seq_len = (measured.tokens + measured.batch - 1) / measured.batch;
    row.access = memory_access(spec, row.measured.config, shape);
    row.access.inputs_in_l2 = measured.inputs_in_l2;
    if (!current_kernels && measured.reread_per_row >= 0) {  // the measured kernel's own second reads
      row.access.reread_bytes = measured.reread_per_row * measured.tokens;
      row.access.reread_distance = measured.reread_distance;
    }
    row.rows = spec.io.output == OutputForm::padded_bhsd ? int64_t(measured.batch) * shape.max_seq_len : measured.tokens;
    out.push_back(std::move(row));
  }
  return out;
}

std::vector<ModelCheck> check_model(const std::vector<ModelRow>& rows, const GpuPart& part) {
  std::vector<ModelCheck> out;
  for (const ModelRow& row : rows) {
    ModelCheck c;
    c.row = row;
    c.estimate = roofline(row.measured.stats, part, row.rows, row.access, row.measured.timing);
    c.ratio = c.estimate.estimate_us / row.measured.us;
    c.in_band = std::abs(c.ratio - 1) <= row.measured.band;
    out.push_back(std::move(c));
  }
  return out;
}

double worst_band_share(const std::vector<ModelCheck>& checks) {
  double worst = 0;
  for (const ModelCheck& c : checks) worst = std::max(worst, std::abs(c.ratio - 1) / c.row.measured.band);
  return worst;
}

GpuPart fit_model(const std::vector<ModelRow>& rows, const GpuPart& start) {
  struct Knob {
    double GpuPart::*field;
    double lo, hi, step;
  };
  const Knob knobs[] = {{&GpuPart::latency_ns, 300, 1200, 10},  {&GpuPart::l2_latency_ns, 50, 500, 10},
                        {&GpuPart::chunk_bytes, 0, 128, 2},      {&GpuPart::overlap, 0, 0.5, 0.01},
                        {&GpuPart::event_launch_us, 0, 15, 0.25}};
  GpuPart best = start;
  double best_worst = worst_band_share(check_model(rows, best));
  for (int round = 0; round < 4; ++round)  // one knob at a time until none moves
    for (const Knob& k : knobs) {
      GpuPart trial = best;
      for (double v = k.lo; v <= k.hi + 1e-9; v += k.step) {
        trial.*k.field = v;
        const double worst = worst_band_share(check_model(rows, trial));
        if (worst < best_worst - 1e-12) best_worst = worst, best = trial;
      }
    }
  return best;
}

}  // namespace ropejit::check
