"""Array objects that expose the GPU protocols without a GPU.

FakeCudaArray carries a `__cuda_array_interface__`; RawDLPack a real DLPack
capsule (built with ctypes) describing any memory as any device and type.
They test how the package reads pointers, shapes, strides and types; with a
host device type and real host memory behind them, RawDLPack also carries
bfloat16 and fp8 data NumPy cannot hold through real collectives.
"""

import ctypes

from weft import buffers

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]

DL_CPU, DL_CUDA, DL_CUDA_HOST, DL_CUDA_MANAGED = 1, 2, 3, 13


class FakeCudaArray:
    """Describes (never touches) device memory at `ptr`."""

    def __init__(self, ptr, shape, typestr, strides=None, readonly=False, stream=None, version=3, mask=None):
        self.__cuda_array_interface__ = {
            "shape": tuple(shape), "typestr": typestr, "data": (ptr, readonly),
            "strides": strides, "version": version, "descr": [("", typestr)],
        }
        if version >= 3:
            self.__cuda_array_interface__["stream"] = stream
        if mask is not None:
            self.__cuda_array_interface__["mask"] = mask


class RawDLPack:
    """A DLPack producer over `ptr` with the given device, type code/bits and shape.

    `versioned` answers max_version=(1, 0) with a DLPack 1.0 capsule (flags
    carry `readonly`); otherwise it answers as a producer that predates
    versioning (rejecting max_version with TypeError, as such producers do).
    `strides` are in elements, as DLPack has them. The streams asked for are
    recorded in `streams`.
    """

    def __init__(self, ptr, shape, code, bits, device_type=DL_CPU, device_id=0, strides=None,
                 byte_offset=0, lanes=1, versioned=False, readonly=False, keep=None):
        self._keep = keep  # e.g. the NumPy array owning the memory
        ndim = len(shape)
        self._shape = (ctypes.c_int64 * max(ndim, 1))(*shape)
        self._strides = (ctypes.c_int64 * max(ndim, 1))(*strides) if strides is not None else None
        tensor = buffers._DLTensor()
        tensor.data = ptr
        tensor.device = buffers._DLDevice(device_type, device_id)
        tensor.ndim = ndim
        tensor.dtype = buffers._DLDataType(code, bits, lanes)
        tensor.shape = ctypes.cast(self._shape, ctypes.POINTER(ctypes.c_int64))
        if self._strides is not None:
            tensor.strides = ctypes.cast(self._strides, ctypes.POINTER(ctypes.c_int64))
        tensor.byte_offset = byte_offset
        self._device = (device_type, device_id)
        self._versioned = versioned
        if versioned:
            self._managed = buffers._DLManagedTensorVersioned()
            self._managed.version = buffers._DLPackVersion(1, 0)
            self._managed.flags = 1 if readonly else 0
        else:
            self._managed = buffers._DLManagedTensor()
        self._managed.dl_tensor = tensor
        self.streams = []

    def __dlpack_device__(self):
        return self._device

    def __dlpack__(self, stream=None, max_version=None):
        if max_version is not None and not self._versioned:
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
        self.streams.append(stream)
        name = b"dltensor_versioned" if self._versioned else b"dltensor"
        return _capsule_new(ctypes.addressof(self._managed), name, None)


def raw_dlpack_of(array, name_code_bits, **kwargs):
    """A host RawDLPack over a NumPy array's memory, typed (code, bits)."""
    code, bits = name_code_bits
    return RawDLPack(array.ctypes.data, array.shape, code, bits, keep=array, **kwargs)
