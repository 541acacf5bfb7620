// Runtime and Kernel for Python. A launch takes its Args as a dict of field names, filled by the
// ropejit package after it has checked every array against the spec (python/ropejit/_arrays.py).
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <type_traits>

#include <nanobind/ndarray.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>

#include "bindings.h"
#include "ropejit/args_fields.h"
#include "ropejit/runtime.h"
#include "ropejit/shipped_tuning.h"

namespace nb = nanobind;

namespace ropejit::python {

namespace {

// Stores a Python value into one Args member: pointers and integers from int, scales from
// float, the positions type from "int32" / "int64".
template <class T>
void store(T& member, nb::handle value, const std::string& name) {
  if constexpr (std::is_pointer_v<T>) {
    member = reinterpret_cast<T>(static_cast<uintptr_t>(nb::cast<uint64_t>(value)));
  } else if constexpr (std::is_same_v<T, PositionsType>) {
    const std::string text = nb::cast<std::string>(value);
    if (text != "int32" && text != "int64")
      throw Error(Status::invalid_argument, name + " \"" + text + "\" is not allowed: must be one of int32 | int64");
    member = text == "int64" ? PositionsType::int64 : PositionsType::int32;
  } else {
    member = nb::cast<T>(value);
  }
}

using Setter = std::function<void(Args&, nb::handle)>;

// Every ropejit_args field by name (struct_size excepted), from the field list
// (ropejit/args_fields.h); test_binding.py checks it against ropejit_struct_field.
const std::map<std::string, Setter>& setters() {
  static const std::map<std::string, Setter> table = [] {
    std::map<std::string, Setter> t;
#define ROPEJIT_SETTER(f, since, used_by) t[#f] = [](Args& a, nb::handle v) { store(a.f, v, #f); };
    ROPEJIT_ARGS_FIELDS(ROPEJIT_SETTER)
#undef ROPEJIT_SETTER
    return t;
  }();
  return table;
}

Args args_from(const nb::dict& fields) {
  Args args;
  for (auto [key, value] : fields) {
    const std::string name = nb::cast<std::string>(key);
    const auto it = setters().find(name);
    if (it == setters().end()) throw Error(Status::invalid_argument, "unknown launch field \"" + name + "\"");
    if (value.is_none()) continue;
    try {
      it->second(args, value);
    } catch (const nb::cast_error&) {
      throw Error(Status::invalid_argument,
                  "launch field " + name + ": " + nb::cast<std::string>(nb::repr(value)) + " has the wrong type");
    }
  }
  return args;
}

RuntimeOptions runtime_options(const std::string& backend, const std::string& cache_dir, bool disk_cache,
                               const std::string& tuning_db, const std::string& arch, int device,
                               bool programmatic_dependent_launch, nb::object on_warning) {
  RuntimeOptions o;
  const auto kind = enum_from_string<BackendKind>(backend);
  if (!kind)
    throw Error(Status::invalid_argument,
                "backend \"" + backend + "\" is not allowed: must be one of " + allowed_names<BackendKind>());
  o.backend = *kind;
  o.cache_dir = cache_dir;
  o.disk_cache = disk_cache;
  o.tuning_db = tuning_db;
  o.arch = arch;
  o.device = device;
  o.programmatic_dependent_launch = programmatic_dependent_launch;
  if (!on_warning.is_none())
    o.on_warning = [on_warning](std::string_view text) {
      nb::gil_scoped_acquire gil;
      try {
        on_warning(nb::str(text.data(), text.size()));
      } catch (nb::python_error& e) {
        e.discard_as_unraisable("ropejit on_warning");
      }
    };
  return o;
}

}  // namespace

void bind_runtime(nb::module_& m) {
  nb::class_<Kernel>(m, "Kernel", "A compiled kernel for one spec.")
      .def(
          "launch",
          [](const Kernel& k, const nb::dict& fields, uint64_t stream) {
            const Args args = args_from(fields);
            nb::gil_scoped_release release;
            k.launch(args, reinterpret_cast<void*>(static_cast<uintptr_t>(stream)));
          },
          nb::arg("fields"), nb::arg("stream") = 0, "Checks every argument, then launches (Args fields by name).")
      .def_prop_ro("spec", &Kernel::spec)
      .def_prop_ro("backend", &Kernel::backend)
      .def_prop_ro("from_cache", &Kernel::from_cache)
      .def_prop_ro("load_ms", &Kernel::load_ms)
      .def("config_name", [](const Kernel& k, int64_t tokens) { return config_name(k.config_for(tokens)); });

  nb::class_<Runtime>(m, "Runtime", "Backend, kernel caches and tuning database.")
      .def(
          "__init__",
          [](Runtime* self, const std::string& backend, const std::string& cache_dir, bool disk_cache,
             const std::string& tuning_db, const std::string& arch, int device, bool pdl, nb::object on_warning) {
            RuntimeOptions o = runtime_options(backend, cache_dir, disk_cache, tuning_db, arch, device, pdl, on_warning);
            nb::gil_scoped_release release;
            new (self) Runtime(std::move(o));
          },
          nb::arg("backend") = "auto", nb::arg("cache_dir") = "", nb::arg("disk_cache") = true,
          nb::arg("tuning_db") = "", nb::arg("arch") = "", nb::arg("device") = 0,
          nb::arg("programmatic_dependent_launch") = false, nb::arg("on_warning") = nb::none())
      .def(
          "get",
          [](Runtime& rt, const Spec& spec, const std::string& config_json) {
            nb::gil_scoped_release release;
            return config_json.empty() ? rt.get(spec) : rt.get(spec, config_from_json(config_json));
          },
          nb::arg("spec"), nb::arg("config_json") = "")
      .def_prop_ro("backend", &Runtime::backend)
      .def_prop_ro("arch", &Runtime::arch)
      .def_prop_ro("sm_count", &Runtime::sm_count);

  m.def("bytes_moved", &bytes_moved, nb::arg("spec"), nb::arg("tokens"), nb::arg("batch") = 0,
        nb::arg("max_seq_len") = 0);
  m.def("args_fields", [] {
    nb::list names;
    for (const auto& [name, setter] : setters()) names.append(name);
    return names;
  });
  // Any __dlpack__ / buffer-protocol object the ropejit package has no faster path for.
  m.def("dlpack_view", [](nb::ndarray<nb::ro> a) {
    nb::list shape, strides;
    for (size_t i = 0; i < a.ndim(); ++i) {
      shape.append(a.shape(i));
      strides.append(a.stride(i));
    }
    return nb::make_tuple(reinterpret_cast<uintptr_t>(a.data()), shape, strides, a.dtype().code, a.dtype().bits,
                          a.dtype().lanes, a.device_type(), a.device_id());
  });
  // Where the installed library reads its shipped tuning files (docs/tuning.md): (folder, why).
  m.def("shipped_tuning_dir", [] {
    const ShippedTuningDir d = shipped_tuning_dir();
    return nb::make_tuple(d.dir, d.origin);
  });
  // The ropejit_args fields that are arrays (pointers), in declaration order: the arrays a
  // Kernel call takes by keyword, so a new array field needs no Python change.
  m.def("array_fields", [] {
    nb::list names;
#define ROPEJIT_ARRAY_FIELD(f, since, used_by) \
    if (std::is_pointer_v<decltype(ropejit_args::f)>) names.append(#f);
    ROPEJIT_ARGS_FIELDS(ROPEJIT_ARRAY_FIELD)
#undef ROPEJIT_ARRAY_FIELD
    return names;
  });
  m.def("struct_field", [](const std::string& type, size_t index) -> nb::object {
    const char* name = ropejit_struct_field(type.c_str(), index, nullptr);
    return name ? nb::object(nb::str(name)) : nb::none();
  });
}

}  // namespace ropejit::python
