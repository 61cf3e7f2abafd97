"""From array objects to (pointer, element count, NCCL type, device).

Three protocols are read, in this order:
  * `__cuda_array_interface__` (CuPy, Numba, PyTorch CUDA tensors, ...),
  * `__array_interface__` (NumPy and anything shaped like it),
  * `__dlpack__` / `__dlpack_device__` (PyTorch, JAX, CuPy, NumPy >= 1.22, ...).
Only C-contiguous buffers are accepted: NCCL works on flat runs of elements,
and a silent copy would break in-place calls and the lifetime rules of
grouped and asynchronous operations.
"""

import ctypes
from typing import NamedTuple, Optional

from .types import BY_DLPACK, BY_DTYPE_NAME, BY_TYPESTR, DataType

HOST = "host"
CUDA = "cuda"
MANAGED = "managed"  # reachable from the host and from the GPU

# dlpack.h device types.
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13
_DL_DEVICES = {_DL_CPU: HOST, _DL_CUDA_HOST: HOST, _DL_CUDA: CUDA, _DL_CUDA_MANAGED: MANAGED}
_DL_READ_ONLY_FLAG = 1  # DLPACK_FLAG_BITMASK_READ_ONLY


class Buffer(NamedTuple):
    """What the C API needs to know about one array argument."""

    ptr: int
    count: int  # elements
    dtype: DataType
    device: str  # HOST, CUDA or MANAGED
    readonly: bool
    shape: tuple
    stream: Optional[int]  # the producer's stream (CUDA array interface v3), if it named one
    owner: object  # kept referenced while the buffer is in use (e.g. a DLPack capsule)

    @property
    def nbytes(self):
        return self.count * self.dtype.itemsize


def _product(shape):
    count = 1
    for extent in shape:
        count *= int(extent)
    return count


def _is_c_contiguous(shape, strides, itemsize):
    """strides in bytes; extents of 1 may have any stride."""
    if strides is None:
        return True
    expected = itemsize
    for extent, stride in zip(reversed(shape), reversed(strides)):
        if extent != 1 and stride != expected:
            return _product(shape) == 0
        expected *= extent
    return True


def _dtype_from_typestr(typestr, name, obj):
    # NumPy's dtype name tells bfloat16 and fp8 (ml_dtypes) apart, which
    # their type strings ("<V2", "|V1") do not.
    order, kind, size = typestr[0], typestr[1], int(typestr[2:])
    if order == ">" and size > 1:
        raise TypeError(f"{name} is big-endian ({typestr!r}); NCCL types are native (little-endian)")
    dtype_name = getattr(getattr(obj, "dtype", None), "name", None)
    if dtype_name in BY_DTYPE_NAME:
        return BY_DTYPE_NAME[dtype_name]
    try:
        return BY_TYPESTR[(kind, size)]
    except KeyError:
        raise TypeError(f"{name} has element type {dtype_name or typestr!r}, which NCCL has no type for; "
                        f"expected one of {sorted(BY_DTYPE_NAME)}") from None


def _from_interface(obj, interface, name, device):
    version = interface.get("version", 0)
    if interface.get("mask") is not None:
        raise TypeError(f"{name} is a masked array; NCCL needs plain elements")
    shape = tuple(int(e) for e in interface["shape"])
    dtype = _dtype_from_typestr(interface["typestr"], name, obj)
    if not _is_c_contiguous(shape, interface.get("strides"), dtype.itemsize):
        raise ValueError(f"{name} is not C-contiguous (strides {interface['strides']}); "
                         "pass a contiguous array (e.g. numpy.ascontiguousarray)")
    data = interface.get("data")
    if data is None or not isinstance(data, tuple):
        # NumPy's __array_interface__ may describe a buffer-protocol object instead of a pointer.
        raise TypeError(f"{name} does not expose a data pointer in its array interface")
    ptr, readonly = data
    ptr = int(ptr or 0) + int(interface.get("offset", 0) or 0)
    stream = interface.get("stream") if device == CUDA and version >= 3 else None
    return Buffer(ptr, _product(shape), dtype, device, bool(readonly), shape, stream, obj)


# --- DLPack, read through the C structures of dlpack.h -------------------------------

class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class _DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", _DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", _DLTensor),
    ]


_capsule_get_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_get_name.restype = ctypes.c_char_p
_capsule_get_name.argtypes = [ctypes.py_object]
_capsule_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_get_pointer.restype = ctypes.c_void_p
_capsule_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _dlpack_capsule(obj, stream):
    """Asks for a versioned capsule, falling back to the original protocol.

    The capsule is read, never consumed: its own destructor then returns the
    tensor to the producer once the capsule is dropped, as the protocol asks
    of an unconsumed capsule.
    """
    try:
        return obj.__dlpack__(stream=stream, max_version=(1, 0))
    except TypeError:  # a producer that predates max_version
        return obj.__dlpack__(stream=stream)


def _dl_tensor(capsule, name):
    capsule_name = _capsule_get_name(capsule)
    if capsule_name == b"dltensor_versioned":
        managed = _DLManagedTensorVersioned.from_address(_capsule_get_pointer(capsule, capsule_name))
        if managed.version.major != 1:
            raise TypeError(f"{name} is DLPack {managed.version.major}.{managed.version.minor}; "
                            "expected major version 1")
        return managed.dl_tensor, bool(managed.flags & _DL_READ_ONLY_FLAG)
    if capsule_name == b"dltensor":
        managed = _DLManagedTensor.from_address(_capsule_get_pointer(capsule, capsule_name))
        return managed.dl_tensor, False
    raise TypeError(f"{name}.__dlpack__() returned a capsule named {capsule_name!r}, "
                    "expected 'dltensor' or 'dltensor_versioned' (already consumed?)")


def _from_dlpack(obj, name, stream):
    device_type, _ = obj.__dlpack_device__() if hasattr(obj, "__dlpack_device__") else (_DL_CPU, 0)
    device = _DL_DEVICES.get(int(device_type))
    if device is None:
        raise TypeError(f"{name} lives on DLPack device type {int(device_type)}; "
                        "expected CPU, CUDA, CUDA host or CUDA managed memory")
    capsule = _dlpack_capsule(obj, stream if device in (CUDA, MANAGED) else None)
    tensor, readonly = _dl_tensor(capsule, name)
    key = (tensor.dtype.code, tensor.dtype.bits)
    if tensor.dtype.lanes != 1 or key not in BY_DLPACK:
        raise TypeError(f"{name} has DLPack type (code {key[0]}, bits {key[1]}, lanes {tensor.dtype.lanes}), "
                        "which NCCL has no type for")
    dtype = BY_DLPACK[key]
    shape = tuple(tensor.shape[i] for i in range(tensor.ndim))
    strides = None
    if tensor.strides:
        strides = tuple(tensor.strides[i] * dtype.itemsize for i in range(tensor.ndim))
    if not _is_c_contiguous(shape, strides, dtype.itemsize):
        raise ValueError(f"{name} is not C-contiguous (element strides "
                         f"{tuple(s // dtype.itemsize for s in strides)}); pass a contiguous tensor")
    ptr = (tensor.data or 0) + tensor.byte_offset
    return Buffer(ptr, _product(shape), dtype, device, readonly, shape, None, (obj, capsule))


def as_buffer(obj, name, stream=None):
    """Describes `obj` for the C API; `name` is the argument's name for errors.

    `stream` is the stream the operation will run on, handed to `__dlpack__`
    so that the producer orders its pending work before it (None: the legacy
    default stream, which is also where an operation given no stream runs).
    """
    interface = getattr(obj, "__cuda_array_interface__", None)
    if interface is not None:
        return _from_interface(obj, interface, name, CUDA)
    interface = getattr(obj, "__array_interface__", None)
    if interface is not None:
        return _from_interface(obj, interface, name, HOST)
    if hasattr(obj, "__dlpack__"):
        return _from_dlpack(obj, name, stream)
    raise TypeError(f"{name} is a {type(obj).__name__}; expected an array exposing "
                    "__cuda_array_interface__, __array_interface__ or __dlpack__ (NumPy, CuPy, PyTorch, ...)")
