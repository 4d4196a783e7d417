"""Type stubs of the compiled module ``segsparse._core`` (use the ``segsparse`` package instead:
it checks arguments and accepts SciPy / CuPy objects)."""

from os import PathLike
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import numpy as np
import numpy.typing as npt

__version__: str

# (converged, status, iterations, residual, solve seconds, history, restarts, message,
#  setup seconds)
_Outcome = Tuple[bool, int, int, float, float, List[float], int, str, float]

class Options:
    """The options of one solve (method, the crate's preconditioner by name, tolerances, the
    iteration limit, whether ``x`` holds a start, ...), checked once."""
    def __init__(
        self, method: str, precond: str, rtol: float, atol: float, maxiter: int, x0: bool,
        check_every: Optional[int] = None, restart: int = 30, degree: int = 5,
    ) -> None: ...

def release_upload_buffers() -> int: ...

class _Matrix:
    def __init__(
        self,
        nrows: int,
        ncols: int,
        indptr: npt.NDArray[np.integer],
        indices: npt.NDArray[np.integer],
        data: npt.NDArray[np.inexact],
        device: str = "auto",
        dtype: Optional[str] = None,
        reuse_buffers: bool = False,
    ) -> None: ...
    @property
    def upload_seconds(self) -> List[Tuple[str, float]]: ...
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
    def spmv_host(
        self, alpha: complex, x: np.ndarray, beta: complex, y: np.ndarray, op: str = "n"
    ) -> None: ...
    def spmv_device(
        self, alpha: complex, x: int, beta: complex, y: int, wait: List[int], signal: int,
        op: str = "n",
    ) -> None: ...
    def solve_host(
        self, opts: Options, b: np.ndarray, x: np.ndarray, amg: Optional[_Amg] = None,
    ) -> _Outcome: ...
    def solve_host_block(
        self, opts: Options, b: np.ndarray, x: np.ndarray, k: int, amg: Optional[_Amg] = None,
    ) -> List[_Outcome]: ...
    def solve_device(
        self, opts: Options, b: int, x: int, wait: List[int], signal: int,
        amg: Optional[_Amg] = None,
    ) -> _Outcome: ...
    def solve_device_block(
        self, opts: Options, b: List[int], x: List[int], wait: List[int], signal: int,
        amg: Optional[_Amg] = None,
    ) -> List[_Outcome]: ...
    def bench_rust_spmv(self, reps: int, gpu: bool) -> float: ...
    def auto_choice(
        self,
    ) -> Tuple[str, str, str, Tuple[Any, ...]]: ...
    def write_matrix_market(self, path: Union[str, PathLike[str]]) -> None: ...

class _Amg:
    def __init__(
        self, matrix: _Matrix, theta: float = 0.0, smoother: str = "chebyshev", degree: int = 3,
        sweeps: int = 1, cycle: str = "V", coarse_size: int = 300, max_levels: int = 10,
        block_size: int = 1, improve_candidates: int = 0,
        candidates: Optional[npt.NDArray[np.float64]] = None,
    ) -> None: ...
    def update(self, matrix: _Matrix) -> None: ...
    def apply_host(self, r: np.ndarray, z: np.ndarray) -> None: ...
    def summary(self) -> str: ...
    def levels(self) -> List[Tuple[int, int]]: ...
    def operator_complexity(self) -> float: ...
    def grid_complexity(self) -> float: ...
    def device_bytes(self) -> int: ...
    def setup_seconds(self) -> float: ...

def clear_auto_cache() -> None: ...
def auto_solve_host(
    matrix: _Matrix, b: np.ndarray, x: np.ndarray, rtol: float, atol: float, maxiter: int,
    x0: bool, check_every: Optional[int] = None, restart: int = 30, probe: bool = True,
    probe_options: Optional[Dict[str, float]] = None, storage: Optional[str] = None,
) -> Tuple[_Outcome, Tuple[Any, ...]]: ...
def auto_solve_device(
    matrix: _Matrix, b: int, x: int, rtol: float, atol: float, maxiter: int, x0: bool,
    wait: List[int], signal: int, check_every: Optional[int] = None, restart: int = 30,
    probe: bool = True, probe_options: Optional[Dict[str, float]] = None,
    storage: Optional[str] = None,
) -> Tuple[_Outcome, Tuple[Any, ...]]: ...
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
def batched_solve_host(
    sizes: List[int], indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, b: np.ndarray,
    x: np.ndarray, method: str, precond: str, rtol: float, atol: float, maxiter: int,
    restart: int, gpu: bool,
) -> Tuple[List[str], List[int], List[float], float, str]: ...
def gpu_versions() -> Tuple[Optional[str], Optional[str], Optional[str]]: ...
def solve_host_operator(
    matrix: Optional[_Matrix], opts: Options, m_apply: Optional[Callable[[np.ndarray], np.ndarray]],
    b: np.ndarray, x: np.ndarray, matvec: Optional[Callable[[np.ndarray], np.ndarray]] = None,
    callback: Optional[Callable[[object], object]] = None, callback_kind: Optional[str] = None,
    residual_scale: float = 1.0,
) -> _Outcome: ...
