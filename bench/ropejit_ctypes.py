"""ctypes binding of the ropejit C API (runtime/include/ropejit/ropejit.h) for bench/peers.py.

Pointers are plain integers (numpy `ctypes.data` or torch `data_ptr()`); the caller keeps the
arrays alive while a kernel runs. The structs (ropejit_args, ropejit_runtime_options) are built
at import time from their declarations in ropejit.h, the one definition of their fields, so
this file never lists them; Library() then checks each field's offset against the loaded
library (ropejit_struct_field). Set ROPEJIT_HEADER to read another copy of ropejit.h.
"""
import ctypes
import json
import os
import re

BACKEND_AUTO, BACKEND_CUDA, BACKEND_HOST = 0, 1, 2
POSITIONS_INT32, POSITIONS_INT64 = 0, 1

HEADER = os.environ.get("ROPEJIT_HEADER") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "runtime", "include", "ropejit", "ropejit.h")

# C types the two structs use -> ctypes. Pointers are mapped by _ctype; anything else is an
# error, so a new field type must be added here rather than silently mislaid.
_SCALARS = {
    "size_t": ctypes.c_size_t, "int": ctypes.c_int, "float": ctypes.c_float, "int32_t": ctypes.c_int32, "int64_t": ctypes.c_int64,
    "ropejit_backend": ctypes.c_int, "ropejit_positions_type": ctypes.c_int,  # C enums: int-sized
}


def _ctype(decl, where):
    """ctypes type of a declared C type ("const int32_t*", "void*", "int64_t")."""
    decl = " ".join(decl.replace("*", " * ").split())
    if decl == "const char *":
        return ctypes.c_char_p
    if decl.endswith("*"):
        return ctypes.c_void_p
    if decl == "void":
        return None
    base = decl[len("const "):] if decl.startswith("const ") else decl
    if base not in _SCALARS:
        raise ValueError(f"{where}: C type '{decl}' has no ctypes mapping in bench/ropejit_ctypes.py")
    return _SCALARS[base]


def parse_struct(header_text, name):
    """[(field, ctype)] of `typedef struct name { ... } name;` in declaration order."""
    m = re.search(r"typedef\s+struct\s+%s\s*\{(.*?)\}\s*%s\s*;" % (name, name), header_text, re.S)
    if not m:
        raise ValueError(f"{HEADER}: no 'typedef struct {name} {{ ... }} {name};'")
    body = re.sub(r"/\*.*?\*/", " ", m.group(1), flags=re.S)
    body = re.sub(r"//[^\n]*", " ", body)
    fields = []
    for decl in (d.strip() for d in body.split(";")):
        if not decl:
            continue
        where = f"{name}: '{decl}'"
        fn = re.fullmatch(r"(.+?)\(\s*\*\s*(\w+)\s*\)\s*\((.*)\)", decl, re.S)
        if fn:  # function pointer: ret (*name)(params)
            params = [re.sub(r"\s*\w+$", "", p.strip()) for p in fn.group(3).split(",") if p.strip()]
            proto = ctypes.CFUNCTYPE(_ctype(fn.group(1), where), *[_ctype(p, where) for p in params])
            fields.append((fn.group(2), proto))
            continue
        # "type a, b, c": the first name's stars belong to it; a shared type has no stars here.
        dm = re.fullmatch(r"([\w\s]+?)\s*(\**)\s*(\w+)((?:\s*,\s*\w+)*)", decl)
        if not dm:
            raise ValueError(f"{where}: not a field declaration this parser knows")
        ctype = _ctype(dm.group(1) + dm.group(2), where)
        fields.append((dm.group(3), ctype))
        fields += [(n.strip(), ctype) for n in dm.group(4).split(",") if n.strip()]
    return fields


def _struct(header_text, c_name, py_name):
    return type(py_name, (ctypes.Structure,), {"_fields_": parse_struct(header_text, c_name),
                                               "__doc__": f"{c_name} (built from ropejit.h)."})


with open(HEADER, encoding="utf-8") as _f:
    _HEADER_TEXT = _f.read()
RuntimeOptions = _struct(_HEADER_TEXT, "ropejit_runtime_options", "RuntimeOptions")
Args = _struct(_HEADER_TEXT, "ropejit_args", "Args")
WarningCallback = dict(RuntimeOptions._fields_)["on_warning"]
STRUCTS = {"ropejit_args": Args, "ropejit_runtime_options": RuntimeOptions}


def layout_mismatches(lib):
    """Differences between the structs here and the library's (ropejit_struct_field): empty
    when every field has the same name, order and offset and the sizes agree."""
    fn = lib.ropejit_struct_field
    fn.restype, fn.argtypes = ctypes.c_char_p, [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]
    problems = []
    for c_name, struct in STRUCTS.items():
        theirs, offset = [], ctypes.c_size_t()
        while True:
            name = lib.ropejit_struct_field(c_name.encode(), len(theirs), ctypes.byref(offset))
            if name is None:
                break
            theirs.append((name.decode(), offset.value))
        ours = [(f, getattr(struct, f).offset) for f, _ in struct._fields_]
        for i in range(max(len(ours), len(theirs))):
            here = ours[i] if i < len(ours) else "nothing"
            there = theirs[i] if i < len(theirs) else "nothing"
            if here != there:  # the first difference; the rest usually follows from it
                problems.append(f"{c_name}: field {i} (name, offset) is {here} here, {there} in the library")
                break
        if offset.value != ctypes.sizeof(struct):
            problems.append(f"{c_name}: {ctypes.sizeof(struct)} bytes here, {offset.value} in the library")
    return problems


class RopejitError(RuntimeError):
    """A failed C API call: status name and ropejit_last_error()."""


class Library:
    """The loaded shared library with typed entry points."""

    def __init__(self, path):
        lib = ctypes.CDLL(path)
        vp, i64, st = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
        sigs = {
            "ropejit_runtime_options_init": (None, [ctypes.POINTER(RuntimeOptions)]),
            "ropejit_args_init": (None, [ctypes.POINTER(Args)]),
            "ropejit_runtime_create": (st, [ctypes.POINTER(RuntimeOptions), ctypes.POINTER(vp)]),
            "ropejit_runtime_destroy": (None, [vp]),
            "ropejit_runtime_backend": (ctypes.c_char_p, [vp]),
            "ropejit_kernel_get": (st, [vp, ctypes.c_char_p, ctypes.POINTER(vp)]),
            "ropejit_kernel_destroy": (None, [vp]),
            "ropejit_kernel_launch": (st, [vp, ctypes.POINTER(Args), vp]),
            "ropejit_kernel_bytes_moved": (st, [vp, i64, ctypes.c_int, i64, ctypes.POINTER(i64)]),
            "ropejit_status_string": (ctypes.c_char_p, [st]),
            "ropejit_last_error": (ctypes.c_char_p, []),
            "ropejit_version": (ctypes.c_char_p, []),
        }
        for name, (res, argtypes) in sigs.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = res, argtypes
        self.lib = lib
        problems = layout_mismatches(lib)
        if problems:
            raise RopejitError(f"{path} does not match {HEADER}:\n  " + "\n  ".join(problems))

    def check(self, status, what):
        if status != 0:
            name = self.lib.ropejit_status_string(status).decode()
            raise RopejitError(f"{what}: {name}: {self.lib.ropejit_last_error().decode()}")

    def version(self):
        return self.lib.ropejit_version().decode()


class Runtime:
    """A ropejit runtime on one backend ("cuda", "host" or "auto")."""

    def __init__(self, library, backend="auto", device=0):
        self.library = library
        options = RuntimeOptions()
        library.lib.ropejit_runtime_options_init(ctypes.byref(options))
        options.backend = {"auto": BACKEND_AUTO, "cuda": BACKEND_CUDA, "host": BACKEND_HOST}[backend]
        options.device = device
        handle = ctypes.c_void_p()
        library.check(library.lib.ropejit_runtime_create(ctypes.byref(options), ctypes.byref(handle)),
                      f"ropejit_runtime_create({backend})")
        self.handle = handle

    def backend(self):
        return self.library.lib.ropejit_runtime_backend(self.handle).decode()

    def kernel(self, spec):
        """Compiles (or finds cached) the kernel of a spec dict."""
        handle = ctypes.c_void_p()
        text = json.dumps(spec).encode()
        self.library.check(self.library.lib.ropejit_kernel_get(self.handle, text, ctypes.byref(handle)),
                           f"ropejit_kernel_get({spec.get('name')})")
        return Kernel(self, handle)

    def __del__(self):
        if getattr(self, "handle", None):
            self.library.lib.ropejit_runtime_destroy(self.handle)
            self.handle = None


class Kernel:
    """A compiled kernel; launch() takes prepared Args (see make_args)."""

    def __init__(self, runtime, handle):
        self.runtime = runtime  # keeps the library alive
        self.library = runtime.library
        self.handle = handle

    def bytes_moved(self, num_tokens, batch=0, max_seq_len=0):
        out = ctypes.c_int64()
        self.library.check(self.library.lib.ropejit_kernel_bytes_moved(
            self.handle, num_tokens, batch, max_seq_len, ctypes.byref(out)), "ropejit_kernel_bytes_moved")
        return out.value

    def make_args(self, num_tokens, pointers, batch=0, max_seq_len=0, seq_len=0, positions_int64=False):
        """Args from a dict of field name -> integer pointer (q, k, v, qkv, bias, q_out, k_out,
        v_out, positions, cu_seqlens, start_pos)."""
        args = Args()
        self.library.lib.ropejit_args_init(ctypes.byref(args))
        args.num_tokens = num_tokens
        for name, ptr in pointers.items():
            setattr(args, name, ptr)
        args.positions_type = POSITIONS_INT64 if positions_int64 else POSITIONS_INT32
        args.batch, args.max_seq_len, args.seq_len = batch, max_seq_len, seq_len
        return args

    def launch(self, args, stream=0):
        """Launches on `stream` (a CUstream as an integer; 0 = the legacy default stream)."""
        status = self.library.lib.ropejit_kernel_launch(self.handle, ctypes.byref(args), stream or None)
        if status != 0:
            self.library.check(status, "ropejit_kernel_launch")

    def __del__(self):
        if getattr(self, "handle", None):
            self.library.lib.ropejit_kernel_destroy(self.handle)
            self.handle = None
