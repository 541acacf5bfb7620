// Spec for Python: parsed and validated by the C++ code, so every rule and message is the library's.
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "ropejit/freqs.h"
#include "ropejit/hf_import.h"
#include "ropejit/introspect.h"
#include "ropejit/spec.h"

namespace nb = nanobind;

namespace ropejit::python {

namespace {

template <class E>
std::string name_of(E value) {
  return std::string(to_string(value));
}

// The validated io block, every field with its default filled.
nb::dict io_dict(const Spec& s) {
  nb::dict io;
  io["input"] = name_of(s.io.input);
  io["output"] = name_of(s.io.output);
  io["qkv_bias"] = s.io.qkv_bias;
  io["copy_v"] = s.io.copy_v;
  io["positions"] = name_of(s.io.positions);
  io["mrope_section"] = s.io.mrope_section;
  io["mrope_interleaved"] = s.io.mrope_interleaved;
  if (s.io.positions == PositionsForm::axes) {  // one position row per axis
    nb::dict axes;
    axes["pairs"] = s.io.axes.pairs;
    axes["theta"] = s.io.axes.theta;
    axes["frequencies"] = name_of(s.io.axes.frequencies);
    axes["placement"] = name_of(s.io.axes.placement);
    io["axes"] = axes;
  }
  if (paged_kv(s)) {
    io["page_size"] = s.io.page_size;
    io["cache_layout"] = name_of(s.io.cache_layout);
    io["cache_dtype"] = name_of(s.io.cache_dtype);
    io["cache_index"] = name_of(s.io.cache_index);
    io["q_output"] = name_of(s.io.q_output);
  }
  return io;
}

nb::object qk_norm_dict(const Spec& s) {
  if (!s.qk_norm.enabled) return nb::none();
  nb::dict d;
  d["type"] = name_of(s.qk_norm.type);
  d["eps"] = s.qk_norm.eps;
  d["weight"] = name_of(s.qk_norm.weight);
  d["weight_offset"] = s.qk_norm.weight_offset;
  d["scope"] = name_of(s.qk_norm.scope);
  d["bias"] = name_of(s.qk_norm.bias);
  d["heads"] = name_of(s.qk_norm.heads);
  return d;
}

// Frequencies as the kernels bake them (HF float32 parity), and the scales beside them.
nb::dict freqs_dict(const Spec& s, const std::string& mode) {
  const auto parsed = enum_from_string<FreqMode>(mode);
  if (!parsed)
    throw Error(Status::invalid_argument,
                "mode \"" + mode + "\" is not allowed: must be one of " + allowed_names<FreqMode>());
  const FreqTable t = compute_freqs(s, *parsed);
  nb::dict d;
  d["rotary_dim"] = t.rotary_dim;
  d["inv_freq"] = t.inv_freq;
  d["inv_freq_long"] = t.inv_freq_long;
  d["attention_factor"] = t.attention_factor;
  d["attention_factor_long"] = t.attention_factor_long;  // longrope's long table (PhiMoE's long_mscale)
  d["softmax_scale"] = t.yarn_attention_softmax_scale ? nb::cast(*t.yarn_attention_softmax_scale) : nb::none();
  return d;
}

// launch_fields at concrete sizes: each field's name, use, element type, dims and shape, whether
// a launch writes it (whole: an output a call may allocate), and its stride fields in use.
// `sizes`: the call sizes by their ropejit_args fields (call_sizes) and "positions_type".
nb::list fields_list(const Spec& spec, const std::map<std::string, nb::object>& sizes) {
  LaunchShape shape;
  for (const auto& [field, size] : sizes) {
    if (field == "positions_type") {
      shape.positions_type = nb::cast<std::string>(size) == "int64" ? PositionsType::int64 : PositionsType::int32;
      continue;
    }
    set_call_size(shape, field, nb::cast<int64_t>(size));
  }
  const std::vector<LaunchField> fields = launch_fields(spec);
  std::set<std::string> used;
  for (const LaunchField& f : fields)
    if (f.use != FieldUse::unused) used.insert(std::string(f.name));
  nb::list out;
  for (const LaunchField& f : fields) {
    nb::dict d;
    const std::string name(f.name);
    d["name"] = name;
    d["use"] = name_of(f.use);
    d["dtype"] = std::string(f.dtype);
    nb::list dims;
    for (std::string_view dim : f.dims) dims.append(std::string(dim));
    d["dims"] = dims;
    d["shape"] = f.dims.empty() ? std::vector<int64_t>{} : field_shape(f, spec, shape);
    d["written"] = f.written;
    d["whole_output"] = f.whole_output;
    const auto in_use = [&](std::string_view field) { return !field.empty() && used.count(std::string(field)) > 0; };
    const auto field_or_none = [&](std::string_view field) {  // None unless the spec's launches read it
      return in_use(field) ? nb::object(nb::str(field.data(), field.size())) : nb::none();
    };
    d["stride_field"] = field_or_none(f.stride_field);
    d["head_stride_field"] = field_or_none(f.head_stride_field);
    d["strided"] = in_use(f.stride_field);
    out.append(d);
  }
  return out;
}

}  // namespace

void bind_spec(nb::module_& m) {
  nb::class_<Spec>(m, "Spec", "A validated RoPE spec (the C++ ropejit::Spec).")
      .def_ro("name", &Spec::name)
      .def_ro("head_dim", &Spec::head_dim)
      .def_ro("rotary_dim", &Spec::rotary_dim)
      .def_ro("num_q_heads", &Spec::num_q_heads)
      .def_ro("num_kv_heads", &Spec::num_kv_heads)
      .def_ro("max_position_embeddings", &Spec::max_position_embeddings)
      .def_prop_ro("layout", [](const Spec& s) { return name_of(s.layout); })
      .def_prop_ro("rotary_slice", [](const Spec& s) { return name_of(s.rotary_slice); })
      .def_prop_ro("dtype", [](const Spec& s) { return name_of(s.dtype); })
      .def_prop_ro("angle", [](const Spec& s) { return name_of(s.angle); })
      .def_prop_ro("rope_type", [](const Spec& s) { return name_of(s.rope.type); })
      .def_prop_ro("op", [](const Spec& s) { return name_of(s.op); })
      .def_prop_ro("io", &io_dict)
      .def_prop_ro("qk_norm", &qk_norm_dict)
      .def_prop_ro("hadamard", [](const Spec& s) { return s.hadamard; })
      .def_prop_ro("hash", [](const Spec& s) { return spec_hash(s).hex(); })
      .def("canonical_json", &canonical_json)
      .def("pretty_json", &pretty_json)
      .def("freqs", &freqs_dict, nb::arg("mode") = "hf_fp32");

  m.def("launch_fields", &fields_list, nb::arg("spec"), nb::arg("sizes"),
        "Every ropejit_args field with how launches of the spec use it, at these sizes (a dict: the call sizes' "
        "ropejit_args fields, call_sizes(), and positions_type).");
  m.def(
      "call_sizes",
      [] {
        nb::list out;
        for (const CallSize& c : call_sizes())
          out.append(nb::make_tuple(std::string(c.symbol), std::string(c.args_field), c.offset));
        return out;
      },
      "The sizes a call gives: (dim symbol, ropejit_args field, offset: field = dim - offset), in the order an "
      "array's dim is trusted.");
  m.def("parse_spec", &parse_spec, nb::arg("json_text"), "Parses and validates spec JSON text.");
  m.def(
      "spec_from_hf",
      [](const std::string& config_text, const std::string& name, const std::optional<std::string>& dtype,
         const std::optional<std::string>& layout, const std::string& layer_type, bool assume_generic,
         const std::string& op) {
        HfImportOptions options;
        const auto op_kind = enum_from_string<OpKind>(op);
        if (!op_kind)
          throw Error(Status::invalid_argument, "op \"" + op + "\" is not allowed: must be one of " + allowed_names<OpKind>());
        options.op = *op_kind;
        options.name = name;
        options.layer_type = layer_type;
        options.assume_generic = assume_generic;
        if (dtype) {
          options.dtype = enum_from_string<DType>(*dtype);
          if (!options.dtype)
            throw Error(Status::invalid_argument,
                        "dtype \"" + *dtype + "\" is not allowed: must be one of " + allowed_names<DType>());
        }
        if (layout) {
          options.layout = enum_from_string<Layout>(*layout);
          if (!options.layout)
            throw Error(Status::invalid_argument,
                        "layout \"" + *layout + "\" is not allowed: must be one of " + allowed_names<Layout>());
        }
        std::vector<std::string> warnings;
        Spec spec = spec_from_hf(HfConfig::parse(config_text), options, &warnings);
        return nb::make_tuple(spec, warnings);
      },
      nb::arg("config_text"), nb::arg("name") = "", nb::arg("dtype") = nb::none(), nb::arg("layout") = nb::none(),
      nb::arg("layer_type") = "", nb::arg("assume_generic") = false, nb::arg("op") = "rope",
      "A spec from HF config.json text (the layer op `op`); returns (spec, warnings).");
  m.def(
      "hf_layer_ops",
      [](const std::string& config_text) {
        nb::list out;
        for (const auto& op : hf_layer_ops(HfConfig::parse(config_text)))
          out.append(op ? nb::cast(std::string(to_string(*op))) : nb::none());
        return out;
      },
      nb::arg("config_text"), "Per decoder layer: the op it runs (\"rope\", \"attn_temperature\", ...), or None.");
  m.def(
      "hf_layer_rope_map",
      [](const std::string& config_text) {
        nb::list out;
        for (const auto& entry : hf_layer_rope_map(HfConfig::parse(config_text)))
          out.append(entry ? nb::cast(*entry) : nb::none());
        return out;
      },
      nb::arg("config_text"),
      "Per decoder layer: the layer type whose rope block it takes (\"\" for one block), or None (no RoPE).");
}

}  // namespace ropejit::python
