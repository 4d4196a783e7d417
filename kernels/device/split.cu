// Split: stable partition by a packed flag (falses first), the paper's one-enumerate
// formulation (Sengupta et al. 2007, §2.3.3) done per tile: falses go to (falses before the
// tile) + (rank among the tile's falses), trues to NF + i - f. See block/block_select.cuh.
// Also the kernels of split-and-segment and of the segmented quicksort.
#include "common.cuh"
#include "block/block_select.cuh"

SELECT_BITS_ENTRIES(split, 0, true)
