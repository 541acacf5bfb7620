"""ctypes binding of the ropejit C API (runtime/include/ropejit/ropejit.h) for bench/peers.py.

Pointers are plain integers (numpy `ctypes.data` or torch `data_ptr()`); the caller keeps the
arrays alive while a kernel runs. ropejit_args is mirrored field by field and its size is
checked against the library's (ropejit_args_init writes struct_size).
"""
import ctypes
import json

BACKEND_AUTO, BACKEND_CUDA, BACKEND_HOST = 0, 1, 2
POSITIONS_INT32, POSITIONS_INT64 = 0, 1


class RuntimeOptions(ctypes.Structure):
    """ropejit_runtime_options."""
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("backend", ctypes.c_int),
        ("cache_dir", ctypes.c_char_p),
        ("disk_cache", ctypes.c_int),
        ("tuning_db", ctypes.c_char_p),
        ("arch", ctypes.c_char_p),
        ("device", ctypes.c_int),
    ]


class Args(ctypes.Structure):
    """ropejit_args (mirrors ropejit::Args)."""
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("num_tokens", ctypes.c_int64),
        ("q", ctypes.c_void_p), ("k", ctypes.c_void_p), ("v", ctypes.c_void_p),
        ("q_stride", ctypes.c_int64), ("k_stride", ctypes.c_int64), ("v_stride", ctypes.c_int64),
        ("qkv", ctypes.c_void_p),
        ("qkv_stride", ctypes.c_int64),
        ("bias", ctypes.c_void_p),
        ("q_out", ctypes.c_void_p), ("k_out", ctypes.c_void_p), ("v_out", ctypes.c_void_p),
        ("q_out_stride", ctypes.c_int64), ("k_out_stride", ctypes.c_int64), ("v_out_stride", ctypes.c_int64),
        ("positions", ctypes.c_void_p),
        ("positions_type", ctypes.c_int),
        ("cu_seqlens", ctypes.c_void_p),
        ("start_pos", ctypes.c_void_p),
        ("batch", ctypes.c_int),
        ("max_seq_len", ctypes.c_int),
        ("seq_len", ctypes.c_int64),
    ]


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
        probe = Args()
        lib.ropejit_args_init(ctypes.byref(probe))
        if probe.struct_size != ctypes.sizeof(Args):
            raise RopejitError(f"ropejit_args is {probe.struct_size} bytes in {path}, "
                               f"{ctypes.sizeof(Args)} here: update bench/ropejit_ctypes.py")

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
