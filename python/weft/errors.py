"""The exception raised when a library call fails."""

import enum

from ._capi import api


class Result(enum.IntEnum):
    """ncclResult_t."""

    SUCCESS = 0
    UNHANDLED_CUDA_ERROR = 1
    SYSTEM_ERROR = 2
    INTERNAL_ERROR = 3
    INVALID_ARGUMENT = 4
    INVALID_USAGE = 5
    REMOTE_ERROR = 6
    IN_PROGRESS = 7


class WeftError(RuntimeError):
    """A library call returned an error.

    Attributes: `result` (a Result, or the raw int for a code this package does
    not know), `function` (the C function that failed) and `detail`
    (ncclGetLastError's message: which argument, which value, what was
    expected, or why the operation failed).
    """

    def __init__(self, function, result, detail):
        try:
            self.result = Result(result)
        except ValueError:
            self.result = result
        self.function = function
        self.detail = detail
        code = _C_NAMES.get(self.result, f"result {int(result)}")
        if not detail:
            message = f"{function} failed ({code})"
        elif detail.startswith(function):
            message = f"{detail} ({code})"  # the library's messages usually name the call
        else:
            message = f"{function}: {detail} ({code})"
        super().__init__(message)


_C_NAMES = {
    Result.UNHANDLED_CUDA_ERROR: "ncclUnhandledCudaError", Result.SYSTEM_ERROR: "ncclSystemError",
    Result.INTERNAL_ERROR: "ncclInternalError", Result.INVALID_ARGUMENT: "ncclInvalidArgument",
    Result.INVALID_USAGE: "ncclInvalidUsage", Result.REMOTE_ERROR: "ncclRemoteError",
    Result.IN_PROGRESS: "ncclInProgress",
}


def check(function, result, comm_handle=None):
    """Raises WeftError if `result` is not success.

    ncclGetLastError must be read right after the failing call and on the same
    thread: the library keeps the calling thread's last message first.
    """
    if result == Result.SUCCESS:
        return
    detail = api.ncclGetLastError(comm_handle)
    detail = detail.decode(errors="replace") if detail else ""
    if not detail:
        detail = (api.ncclGetErrorString(result) or b"").decode(errors="replace")
    raise WeftError(function, result, detail)
