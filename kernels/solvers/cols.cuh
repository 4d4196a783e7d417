// The column tables of the block steps (backend::block): one launch runs a solver step for up to
// BLOCK_COLS columns of a solve with several right-hand sides, column c in the blocks with
// blockIdx.y == c. Each column's vectors, slots, partial sums, ticket and history are its own
// buffers, so a column's blocks run exactly the one-column step on its own data: the same grid in
// x, the same elements per thread, the same reductions in the same order, and so the same bits.
//
// The table travels by value in the kernel's parameters (BLOCK_COLS * BLOCK_PTRS pointers and two
// words per column, under the 4 KiB parameter limit of every architecture): a launch needs no
// upload and can be captured in a CUDA graph. Which pointer is which is the step's own list,
// written beside its entry point and mirrored by the host function that fills the table.
#include "common.cuh"

#if !defined(BLOCK_COLS) || !defined(BLOCK_PTRS)
#error "BLOCK_COLS and BLOCK_PTRS come from the Rust side as -D defines (backend::gpu::block)"
#endif

struct ColTab {
    unsigned long long p[BLOCK_COLS][BLOCK_PTRS];
    // The iteration argument of the column's step (its iteration minus its slots' base).
    u32 it[BLOCK_COLS];
    // A second per-column word (GMRES: the Krylov column j).
    u32 aux[BLOCK_COLS];
};

// Pointer k of this block's column, as a TY*.
#define COL(TY, k) reinterpret_cast<TY*>(tab.p[blockIdx.y][k])
#define COL_IT (tab.it[blockIdx.y])
#define COL_AUX (tab.aux[blockIdx.y])
