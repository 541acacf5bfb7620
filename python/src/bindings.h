#pragma once
// The pieces of the ropejit._ropejit extension (module.cpp): each binds one concept.
#include <nanobind/nanobind.h>

namespace ropejit::python {

/// ropejit.Error and its subclasses, and the translator from ropejit::Error to them.
void bind_errors(nanobind::module_& m);
/// Spec: parse, HF import, validated fields, canonical JSON, frequencies.
void bind_spec(nanobind::module_& m);
/// Runtime and Kernel: get a kernel for a spec, launch it with a dict of Args fields.
void bind_runtime(nanobind::module_& m);

}  // namespace ropejit::python
