"""How arrays become (pointer, count, type, device): NumPy, the CUDA array
interface and DLPack, with fake GPU arrays (no GPU needed), and how a cuda
communicator hands them to the library."""

import ctypes

import pytest

import weft
from weft import DataType, buffers
from weft.collectives import stream_handle
from fake_arrays import DL_CPU, DL_CUDA, DL_CUDA_HOST, DL_CUDA_MANAGED, FakeCudaArray, RawDLPack

GPU_PTR = 0x7F00_0000_1000  # never dereferenced


def test_cuda_array_interface_pointer_shape_type():
    buf = weft.as_buffer(FakeCudaArray(GPU_PTR, (4, 5), "<f4"), "x")
    assert (buf.ptr, buf.count, buf.dtype, buf.device, buf.shape) == (GPU_PTR, 20, DataType.FLOAT32, "cuda", (4, 5))
    assert not buf.readonly and buf.stream is None and buf.nbytes == 80


@pytest.mark.parametrize("typestr, dtype", [("|i1", DataType.INT8), ("|u1", DataType.UINT8), ("<i4", DataType.INT32),
                                            ("<u4", DataType.UINT32), ("<i8", DataType.INT64),
                                            ("<u8", DataType.UINT64), ("<f2", DataType.FLOAT16),
                                            ("<f4", DataType.FLOAT32), ("<f8", DataType.FLOAT64)])
def test_cuda_array_interface_types(typestr, dtype):
    assert weft.as_buffer(FakeCudaArray(GPU_PTR, (3,), typestr), "x").dtype == dtype


def test_cuda_array_interface_strides_stream_readonly():
    # Explicit C-order strides are contiguous; a dimension of extent 1 may have any stride.
    assert weft.as_buffer(FakeCudaArray(GPU_PTR, (2, 3), "<f8", strides=(24, 8)), "x").count == 6
    assert weft.as_buffer(FakeCudaArray(GPU_PTR, (1, 3), "<f8", strides=(999, 8)), "x").count == 3
    with pytest.raises(ValueError, match="x is not C-contiguous"):
        weft.as_buffer(FakeCudaArray(GPU_PTR, (2, 3), "<f8", strides=(8, 16)), "x")
    assert weft.as_buffer(FakeCudaArray(GPU_PTR, (3,), "<f4", stream=0x55), "x").stream == 0x55
    assert weft.as_buffer(FakeCudaArray(GPU_PTR, (3,), "<f4", stream=0x55, version=2), "x").stream is None
    assert weft.as_buffer(FakeCudaArray(GPU_PTR, (3,), "<f4", readonly=True), "x").readonly


def test_cuda_array_interface_rejections():
    with pytest.raises(TypeError, match="no type for"):
        weft.as_buffer(FakeCudaArray(GPU_PTR, (3,), "<c8"), "x")
    with pytest.raises(TypeError, match="big-endian"):
        weft.as_buffer(FakeCudaArray(GPU_PTR, (3,), ">f4"), "x")
    with pytest.raises(TypeError, match="masked"):
        weft.as_buffer(FakeCudaArray(GPU_PTR, (3,), "<f4", mask=object()), "x")


def test_dlpack_legacy_capsule_on_cuda():
    fake = RawDLPack(GPU_PTR, (2, 8), code=2, bits=16, device_type=DL_CUDA, byte_offset=64)
    buf = weft.as_buffer(fake, "x", stream=0x77)
    assert (buf.ptr, buf.count, buf.dtype, buf.device, buf.shape) == (GPU_PTR + 64, 16, DataType.FLOAT16,
                                                                     "cuda", (2, 8))
    assert fake.streams == [0x77], "the consumer's stream goes to a CUDA producer"


def test_dlpack_versioned_capsule_flags_and_types():
    fake = RawDLPack(GPU_PTR, (5,), code=4, bits=16, device_type=DL_CUDA, versioned=True, readonly=True)
    buf = weft.as_buffer(fake, "x")
    assert buf.dtype == DataType.BFLOAT16 and buf.readonly and buf.count == 5
    for code, dtype in [(10, DataType.FLOAT8_E4M3), (12, DataType.FLOAT8_E5M2), (0, DataType.INT8)]:
        bits = 8
        assert weft.as_buffer(RawDLPack(GPU_PTR, (5,), code, bits, device_type=DL_CUDA), "x").dtype == dtype


def test_dlpack_devices():
    expected = {DL_CPU: "host", DL_CUDA_HOST: "host", DL_CUDA: "cuda", DL_CUDA_MANAGED: "managed"}
    for device_type, device in expected.items():
        fake = RawDLPack(GPU_PTR, (4,), 2, 32, device_type=device_type)
        assert weft.as_buffer(fake, "x", stream=5).device == device
        # Only GPU-side producers are handed a stream; for the CPU the protocol wants None.
        assert fake.streams == [5 if device in ("cuda", "managed") else None]
    with pytest.raises(TypeError, match="DLPack device type 4"):
        weft.as_buffer(RawDLPack(GPU_PTR, (4,), 2, 32, device_type=4), "x")


def test_dlpack_rejections():
    with pytest.raises(ValueError, match="not C-contiguous"):
        weft.as_buffer(RawDLPack(GPU_PTR, (4, 4), 2, 32, device_type=DL_CUDA, strides=(1, 4)), "x")
    assert weft.as_buffer(RawDLPack(GPU_PTR, (4, 4), 2, 32, device_type=DL_CUDA, strides=(4, 1)), "x").count == 16
    with pytest.raises(TypeError, match="lanes 4"):
        weft.as_buffer(RawDLPack(GPU_PTR, (4,), 2, 32, device_type=DL_CUDA, lanes=4), "x")
    with pytest.raises(TypeError, match="code 6"):  # bool
        weft.as_buffer(RawDLPack(GPU_PTR, (4,), 6, 8, device_type=DL_CUDA), "x")


def test_not_an_array():
    with pytest.raises(TypeError, match="x is a dict"):
        weft.as_buffer({}, "x")


def test_numpy_arrays():
    np = pytest.importorskip("numpy", reason="NumPy is not installed (Debian: python3-numpy)")
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    buf = weft.as_buffer(a, "a")
    assert (buf.ptr, buf.count, buf.dtype, buf.device) == (a.ctypes.data, 24, DataType.FLOAT32, "host")
    row = weft.as_buffer(a[2], "row")
    assert row.ptr == a.ctypes.data + 2 * 6 * 4 and row.count == 6
    with pytest.raises(ValueError, match="not C-contiguous"):
        weft.as_buffer(a[:, 1], "col")
    assert weft.as_buffer(np.zeros((0, 3), dtype=np.int64), "e").count == 0
    with pytest.raises(TypeError, match="big-endian"):
        weft.as_buffer(np.zeros(3, dtype=">i4"), "b")
    with pytest.raises(TypeError, match="complex64"):
        weft.as_buffer(np.zeros(3, dtype=np.complex64), "c")


def test_torch_cpu_tensors_through_dlpack():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed (Debian: python3-torch)")
    t = torch.arange(10, dtype=torch.bfloat16)[2:]
    buf = weft.as_buffer(t, "t")
    assert (buf.ptr, buf.count, buf.dtype, buf.device) == (t.data_ptr(), 8, DataType.BFLOAT16, "host")


def test_stream_handles():
    class TorchLike:
        cuda_stream = 11

    class CupyLike:
        ptr = 12

    class Protocol:
        def __cuda_stream__(self):
            return (0, 13)

    assert [stream_handle(s) for s in (None, 10, TorchLike(), CupyLike(), Protocol())] == [None, 10, 11, 12, 13]
    with pytest.raises(TypeError, match="stream is a str"):
        stream_handle("s")


class _RecordingComm(weft.Communicator):
    """A cuda-backend communicator with no library behind it: records the C calls."""

    def __init__(self, rank=0, size=2):
        self._handle, self._rank, self._size, self._backend = 0xC0FFEE, rank, size, "cuda"
        self.calls = []

    def _call(self, function, *args):
        self.calls.append((function,) + args)

    def __del__(self):
        pass


def test_cuda_communicator_passes_pointers_counts_and_streams():
    comm = _RecordingComm()
    send = FakeCudaArray(GPU_PTR, (8,), "<f4", stream=0x99)
    recv = FakeCudaArray(GPU_PTR + 4096, (8,), "<f4")
    assert comm.all_reduce(send, recv, op="max") is recv
    assert comm.calls[-1] == ("ncclAllReduce", GPU_PTR, GPU_PTR + 4096, 8, DataType.FLOAT32, 2, 0xC0FFEE, 0x99)
    comm.all_gather(FakeCudaArray(GPU_PTR, (3,), "<i8"), FakeCudaArray(GPU_PTR + 64, (2, 3), "<i8"), stream=7)
    assert comm.calls[-1] == ("ncclAllGather", GPU_PTR, GPU_PTR + 64, 3, DataType.INT64, 0xC0FFEE, 7)
    dl = RawDLPack(GPU_PTR, (6,), 4, 16, device_type=DL_CUDA)
    comm.reduce_scatter(dl, RawDLPack(GPU_PTR + 512, (3,), 4, 16, device_type=DL_CUDA))
    assert comm.calls[-1] == ("ncclReduceScatter", GPU_PTR, GPU_PTR + 512, 3, DataType.BFLOAT16, 0, 0xC0FFEE, None)
    comm.send(dl, peer=1, stream=3)
    assert comm.calls[-1] == ("ncclSend", GPU_PTR, 6, DataType.BFLOAT16, 1, 0xC0FFEE, 3)


def test_cuda_communicator_refuses_host_memory_and_allocation():
    np = pytest.importorskip("numpy", reason="NumPy is not installed (Debian: python3-numpy)")
    comm = _RecordingComm()
    with pytest.raises(ValueError, match="sendbuf is host memory.*cuda backend"):
        comm.all_reduce(np.ones(4, dtype=np.float32))
    with pytest.raises(TypeError, match="recvbuf is required"):
        comm.all_reduce(FakeCudaArray(GPU_PTR, (4,), "<f4"))
    with pytest.raises(ValueError, match="recvbuf is read-only"):
        comm.all_reduce(FakeCudaArray(GPU_PTR, (4,), "<f4"), FakeCudaArray(GPU_PTR, (4,), "<f4", readonly=True))
    assert comm.calls == []


def test_dlpack_structures_match_dlpack_h():
    # dlpack.h on x86-64: DLTensor 48 bytes, DLManagedTensor 64, versioned 80.
    assert ctypes.sizeof(buffers._DLTensor) == 48
    assert ctypes.sizeof(buffers._DLManagedTensor) == 64
    assert ctypes.sizeof(buffers._DLManagedTensorVersioned) == 80
    assert buffers._DLManagedTensorVersioned.dl_tensor.offset == 32
