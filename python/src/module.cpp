// ropejit._ropejit: the C++ API for the Python package (python/ropejit wraps it for users).
#include <exception>
#include <string>

#include <nanobind/stl/string.h>

#include "bindings.h"
#include "ropejit/spec.h"
#include "ropejit/version.h"

namespace nb = nanobind;

namespace ropejit::python {

namespace {

// Exception classes by status; SpecError also carries the issues.
PyObject* g_error = nullptr;
PyObject* g_spec_error = nullptr;
PyObject* g_argument_error = nullptr;
PyObject* g_unsupported_error = nullptr;
PyObject* g_compile_error = nullptr;

PyObject* new_class(nb::module_& m, const char* name, const char* doc, PyObject* bases) {
  const std::string qualified = std::string("ropejit.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  if (!type) throw nb::python_error();
  m.attr(name) = nb::handle(type);
  return type;
}

// Raises `type(message)` with `status` (and `issues`, `log` where given) as attributes.
void raise(PyObject* type, const ropejit::Error& e, nb::object issues) {
  nb::object exc = nb::steal(PyObject_CallFunction(type, "s", e.what()));
  if (!exc.is_valid()) return;  // the call set its own error
  exc.attr("status") = nb::str(status_name(e.code()));
  exc.attr("field") = nb::str(e.field().c_str());
  exc.attr("log") = nb::str(e.log().c_str());
  exc.attr("issues") = issues;
  PyErr_SetObject(type, exc.ptr());
}

}  // namespace

void bind_errors(nb::module_& m) {
  g_error = new_class(m, "Error", "A ropejit failure; `status` names its kind (ropejit::Status).", nullptr);
  nb::object value_bases = nb::make_tuple(nb::handle(g_error), nb::handle(PyExc_ValueError));
  g_spec_error = new_class(m, "SpecError",
                           "The spec (or HF config) is invalid; `issues` lists (json_pointer, message) pairs.",
                           value_bases.ptr());
  g_argument_error = new_class(m, "ArgumentError", "A launch or API argument is bad.", value_bases.ptr());
  nb::object unsupported_bases = nb::make_tuple(nb::handle(g_error), nb::handle(PyExc_NotImplementedError));
  g_unsupported_error = new_class(m, "UnsupportedError", "Valid, but this build or backend cannot do it.",
                                  unsupported_bases.ptr());
  g_compile_error = new_class(m, "CompileError", "NVRTC or the host compiler rejected the source; see `log`.",
                              nb::make_tuple(nb::handle(g_error)).ptr());
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const SpecError& e) {
      nb::list issues;
      for (const SpecIssue& issue : e.issues()) issues.append(nb::make_tuple(issue.pointer, issue.message));
      raise(g_spec_error, e, issues);
    } catch (const ropejit::Error& e) {
      PyObject* type = e.code() == Status::invalid_spec       ? g_spec_error
                       : e.code() == Status::invalid_argument ? g_argument_error
                       : e.code() == Status::unsupported      ? g_unsupported_error
                       : e.code() == Status::compile_error    ? g_compile_error
                                                              : g_error;
      raise(type, e, nb::list());
    }
  });
}

}  // namespace ropejit::python

NB_MODULE(_ropejit, m) {
  m.doc() = "ropejit's C++ API (use the ropejit package, which wraps it)";
  // A Spec or Kernel a patched model still holds at interpreter exit is not a leak worth a report.
  nanobind::set_leak_warnings(false);
  m.attr("__version__") = ropejit::version();
  ropejit::python::bind_errors(m);
  ropejit::python::bind_spec(m);
  ropejit::python::bind_runtime(m);
}
