"""Finding and loading Weft's shared library.

The package talks to the library through ctypes. Because Weft is a drop-in
libnccl.so.2, a careless lookup could pick NVIDIA's NCCL instead (a CUDA
toolkit puts one on the loader path); every candidate is therefore checked
for Weft's own symbols, and the file actually mapped is read back with
dladdr, so `library_path()` names what runs, not what was asked for.
"""

import ctypes
import ctypes.util
import glob
import os
import threading

# Names the library is installed under, Weft's own first: libweft cannot be
# NVIDIA's, while libnccl.so.2 may be either.
_INSTALLED_NAMES = ("libweft.so", "libnccl.so.2")
# File names looked for in a build tree's lib/ directory.
_BUILD_TREE_NAMES = ("libnccl.so.2", "libweft.so")

_lock = threading.Lock()
_loaded = None  # (CDLL, resolved path) once loaded


class LibraryNotFound(ImportError):
    """No loadable Weft library was found; the message lists what was tried."""


class _DlInfo(ctypes.Structure):
    _fields_ = [
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    ]


def _dladdr_function():
    # glibc >= 2.34 has dladdr in libc; older ones in libdl.
    for name in (None, ctypes.util.find_library("dl")):
        try:
            fn = ctypes.CDLL(name).dladdr
        except (OSError, AttributeError):
            continue
        fn.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
        fn.restype = ctypes.c_int
        return fn
    return None


def _mapped_file(lib):
    """The path of the file that provides `lib`'s weftGetVersion."""
    dladdr = _dladdr_function()
    if dladdr is None:
        return None
    info = _DlInfo()
    address = ctypes.cast(lib.weftGetVersion, ctypes.c_void_p)
    if dladdr(address, ctypes.byref(info)) == 0 or not info.dli_fname:
        return None
    return os.path.realpath(os.fsdecode(info.dli_fname))


def _sanitized(build_dir):
    """Whether a build tree was built with a sanitizer (WEFT_SANITIZE in its
    CMakeCache.txt): its library needs the sanitizer's runtime loaded before
    anything else, which a plain Python interpreter has not done."""
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt")) as cache:
            for line in cache:
                if line.startswith("WEFT_SANITIZE:"):
                    return line.split("=", 1)[1].strip() != ""
    except OSError:
        pass
    return False


def _source_tree_candidates():
    """libnccl.so.2 of the build trees next to this package's source tree.

    When the package is used from the repository (PYTHONPATH=python), the
    repository root is two levels up; its build directories (build, build-*)
    hold lib/libnccl.so.2. The most recently built one wins; sanitizer
    builds are left out (WEFT_LIBRARY can still name one, with the
    sanitizer's runtime preloaded).
    """
    package_dir = os.path.dirname(os.path.abspath(__file__))
    repo_root = os.path.dirname(os.path.dirname(package_dir))
    if not os.path.isfile(os.path.join(repo_root, "include", "weft.h")):
        return []
    found = []
    for build_dir in glob.glob(os.path.join(repo_root, "build*")):
        if _sanitized(build_dir):
            continue
        for name in _BUILD_TREE_NAMES:
            path = os.path.join(build_dir, "lib", name)
            if os.path.isfile(path):
                found.append(path)
                break
    found.sort(key=os.path.getmtime, reverse=True)
    return found


def _candidates():
    """(how it was found, what to pass to dlopen) in the order they are tried."""
    explicit = os.environ.get("WEFT_LIBRARY")
    if explicit:
        # An explicit choice is final: falling back silently would hide a typo.
        return [("WEFT_LIBRARY", explicit)]
    result = [("build tree", path) for path in _source_tree_candidates()]
    home = os.environ.get("WEFT_HOME")
    if home:
        for libdir in ("lib", "lib64"):
            result += [("WEFT_HOME", os.path.join(home, libdir, n)) for n in _INSTALLED_NAMES]
    result += [("loader path", name) for name in _INSTALLED_NAMES]
    return result


def _try_load(origin, target):
    """Returns (CDLL, path) or raises OSError with a reason."""
    if os.sep in target and not os.path.exists(target):
        raise OSError("no such file")
    lib = ctypes.CDLL(target)
    if not hasattr(lib, "weftGetVersion"):
        where = _mapped_file_of_nccl(lib) or target
        raise OSError(f"{where} has no weftGetVersion: it is not Weft (NVIDIA's NCCL?)")
    path = _mapped_file(lib)
    if path is None:
        path = os.path.realpath(target) if os.sep in target else target
    return lib, path


def _mapped_file_of_nccl(lib):
    # Best effort, for the error message only: which file answered to ncclGetVersion.
    dladdr = _dladdr_function()
    if dladdr is None or not hasattr(lib, "ncclGetVersion"):
        return None
    info = _DlInfo()
    if dladdr(ctypes.cast(lib.ncclGetVersion, ctypes.c_void_p), ctypes.byref(info)) == 0:
        return None
    return os.fsdecode(info.dli_fname) if info.dli_fname else None


def load():
    """Loads Weft's library once and returns (CDLL, path of the mapped file)."""
    global _loaded
    with _lock:
        if _loaded is not None:
            return _loaded
        tried = []
        for origin, target in _candidates():
            try:
                _loaded = _try_load(origin, target)
                return _loaded
            except OSError as err:
                tried.append(f"  {target} ({origin}): {err}")
        raise LibraryNotFound(
            "cannot load Weft's library; tried:\n" + "\n".join(tried) +
            "\nSet WEFT_LIBRARY to the path of Weft's libnccl.so.2 (build/lib/ or the install's lib/)")


def library_path():
    """The file Weft was loaded from (resolved through symlinks)."""
    return load()[1]
