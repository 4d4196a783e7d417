"""Type stubs of the compiled module ``segsparse._core`` (use the ``segsparse`` package instead:
it checks arguments and accepts SciPy / CuPy objects)."""

from os import PathLike
from typing import List, Optional, Tuple, Union

import numpy as np
import numpy.typing as npt

__version__: str

# (converged, status, iterations, residual, seconds, history, restarts, message)
_Outcome = Tuple[bool, int, int, float, float, List[float], int, str]

class _Matrix:
    def __init__(
        self,
        nrows: int,
        ncols: int,
        indptr: npt.NDArray[np.integer],
        indices: npt.NDArray[np.integer],
        data: npt.NDArray[np.floating],
        device: str = "auto",
    ) -> None: ...
    @property
    def shape(self) -> Tuple[int, int]: ...
    @property
    def nnz(self) -> int: ...
    @property
    def dtype(self) -> str: ...
    @property
    def on_gpu(self) -> bool: ...
    @property
    def gpu_algorithm(self) -> Optional[str]: ...
    def to_arrays(self) -> Tuple[np.ndarray, np.ndarray, np.ndarray]: ...
    def spmv_host(self, alpha: float, x: np.ndarray, beta: float, y: np.ndarray) -> None: ...
    def spmv_device(
        self, alpha: float, x: int, beta: float, y: int, wait: List[int], signal: int
    ) -> None: ...
    def solve_host(
        self, method: str, precond: str, b: np.ndarray, x: np.ndarray, rtol: float,
        atol: float, maxiter: int, x0: bool, check_every: Optional[int] = None,
        restart: int = 30, degree: int = 4,
    ) -> _Outcome: ...
    def solve_device(
        self, method: str, precond: str, b: int, x: int, rtol: float, atol: float,
        maxiter: int, x0: bool, wait: List[int], signal: int, check_every: Optional[int] = None,
        restart: int = 30, degree: int = 4,
    ) -> _Outcome: ...
    def bench_rust_spmv(self, reps: int, gpu: bool) -> float: ...
    def write_matrix_market(self, path: Union[str, PathLike[str]]) -> None: ...

def read_matrix_market(
    path: Union[str, PathLike[str]], dtype: str = "float64"
) -> Tuple[int, int, np.ndarray, np.ndarray, np.ndarray]: ...
def scan_host(
    x: np.ndarray, out: np.ndarray, op: str, inclusive: bool, reverse: bool,
    offsets: Optional[np.ndarray] = None,
) -> None: ...
def scan_device(
    dtype: str, x: int, out: int, n: int, op: str, inclusive: bool, reverse: bool,
    wait: List[int], signal: int, offsets: Optional[int] = None, nseg: int = 0,
) -> None: ...
def sort_host(keys: np.ndarray, with_perm: bool) -> Tuple[np.ndarray, Optional[np.ndarray]]: ...
def sort_device(
    dtype: str, keys: int, n: int, perm: Optional[int], wait: List[int], signal: int
) -> None: ...
def tridiag_host(
    n: int, lower: np.ndarray, diag: np.ndarray, upper: np.ndarray, rhs: np.ndarray,
    use_gpu: bool,
) -> np.ndarray: ...
def tridiag_device(
    dtype: str, n: int, len: int, ptrs: List[int], wait: List[int], signal: int
) -> None: ...
def gpu_status() -> Tuple[bool, Optional[str], Optional[str]]: ...
def gpu_versions() -> Tuple[Optional[str], Optional[str], Optional[str]]: ...
