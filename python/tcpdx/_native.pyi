"""Type stubs of the native module (the Rust half of tcpdx); use the functions of
``tcpdx`` itself, which give these their documented signatures."""

from collections.abc import Callable, Iterator
from typing import Any, Optional

import pyarrow

VERSION: str
TABLES: list[str]

class CaptureError(ValueError): ...
class CaptureWarning(UserWarning): ...

_Progress = Optional[Callable[[int, Optional[int], int], Any]]

def diagnose_json(
    path: str,
    *,
    threads: Optional[int] = None,
    max_flows: Optional[int] = None,
    decode_as: Optional[dict[int, str]] = None,
    stream: list[int] = ...,
    port: list[int] = ...,
    progress: _Progress = None,
) -> str: ...
def table(
    name: str,
    path: str,
    *,
    batch_size: int = 65536,
    threads: Optional[int] = None,
    max_flows: Optional[int] = None,
    decode_as: Optional[dict[int, str]] = None,
    stream: list[int] = ...,
    port: list[int] = ...,
    progress: _Progress = None,
) -> pyarrow.Table: ...
def schema(name: str) -> pyarrow.Schema: ...
def batches(
    name: str,
    path: str,
    *,
    batch_size: int = 65536,
    threads: Optional[int] = None,
    max_flows: Optional[int] = None,
    decode_as: Optional[dict[int, str]] = None,
    stream: list[int] = ...,
    port: list[int] = ...,
    progress: _Progress = None,
) -> Batches: ...

class Batches(Iterator[pyarrow.RecordBatch]):
    def __iter__(self) -> Batches: ...
    def __next__(self) -> pyarrow.RecordBatch: ...
    def close(self) -> None: ...
