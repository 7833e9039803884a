"""The daemon's statuses as Python exceptions: one class per gRPC canonical code, all
subclasses of KerneldError, each carrying .code (the gRPC number), .code_name and .message."""
from __future__ import annotations

from typing import Dict, Type


class KerneldError(Exception):
    """A kerneld call failed. `code` is the gRPC canonical code, `message` the daemon's (or the
    library's) text, which names the field and the rule it broke."""

    code = 2
    code_name = "UNKNOWN"

    def __init__(self, message: str = "", code: int = None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return f"{self.code_name}: {self.message}"


class Cancelled(KerneldError):
    code, code_name = 1, "CANCELLED"


class Unknown(KerneldError):
    code, code_name = 2, "UNKNOWN"


class InvalidArgument(KerneldError, ValueError):
    code, code_name = 3, "INVALID_ARGUMENT"


class DeadlineExceeded(KerneldError):
    code, code_name = 4, "DEADLINE_EXCEEDED"


class NotFound(KerneldError, LookupError):
    code, code_name = 5, "NOT_FOUND"


class AlreadyExists(KerneldError):
    code, code_name = 6, "ALREADY_EXISTS"


class PermissionDenied(KerneldError):
    code, code_name = 7, "PERMISSION_DENIED"


class ResourceExhausted(KerneldError):
    code, code_name = 8, "RESOURCE_EXHAUSTED"


class FailedPrecondition(KerneldError):
    code, code_name = 9, "FAILED_PRECONDITION"


class Aborted(KerneldError):
    code, code_name = 10, "ABORTED"


class OutOfRange(KerneldError, ValueError):
    code, code_name = 11, "OUT_OF_RANGE"


class Unimplemented(KerneldError, NotImplementedError):
    code, code_name = 12, "UNIMPLEMENTED"


class Internal(KerneldError):
    code, code_name = 13, "INTERNAL"


class Unavailable(KerneldError):
    code, code_name = 14, "UNAVAILABLE"


class DataLoss(KerneldError):
    code, code_name = 15, "DATA_LOSS"


class Unauthenticated(KerneldError):
    code, code_name = 16, "UNAUTHENTICATED"


BY_CODE: Dict[int, Type[KerneldError]] = {
    cls.code: cls
    for cls in (Cancelled, Unknown, InvalidArgument, DeadlineExceeded, NotFound, AlreadyExists,
                PermissionDenied, ResourceExhausted, FailedPrecondition, Aborted, OutOfRange,
                Unimplemented, Internal, Unavailable, DataLoss, Unauthenticated)
}


def from_code(code: int, message: str) -> KerneldError:
    """The exception for a gRPC code; a number outside 1..16 gives Unknown carrying it."""
    cls = BY_CODE.get(code)
    if cls is None:
        return Unknown(f"{message} (code {code})", code=code)
    return cls(message)
