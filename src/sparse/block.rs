//! Block structure of sparse matrices: block patterns, and the Galerkin product `R·A·P`
//! stored by whole blocks — the reference that defines [`crate::sparse::gpu::BlockGalerkin`].
//!
//! A matrix with `rb × cb` blocks has a **block pattern**: one entry per block that holds a
//! stored entry. The product by blocks of `R` (`kc × ka` blocks), `A` (`ka × ka`) and `P`
//! (`ka × kc`) has as its pattern the product of the three block patterns, every block stored
//! whole: the scalar product's entries with their values, and `+0` in the entries of those
//! blocks that no scalar product reaches (a block of `P` present through one row of a node, a
//! block of `A` present through another). [`BlockClosure`] computes it from the scalar product,
//! which is how the host gets the device's result bit for bit (the device adds the same products
//! in the same order; the padding's `±0` products leave every sum unchanged).
//!
//! A matrix takes the block path only when its sides divide by the blocks, the blocks are at
//! most [`BLOCK_MAX`] on a side, and its whole blocks hold at most [`MAX_FILL`] times its own
//! entries ([`blocks_fit`], [`fill_fits`]: the device decides by the same rules).

use crate::csr::CsrMatrix;
use crate::error::{Error, Result};
use crate::scalar::Scalar;

/// Largest block side of the block path.
pub const BLOCK_MAX: usize = 8;

/// Most entries a matrix's whole blocks may hold, as a multiple of its own entries.
pub const MAX_FILL: f64 = 2.0;

/// Whether a `nrows × ncols` matrix can be seen with `rb × cb` blocks.
pub fn blocks_fit(nrows: usize, ncols: usize, rb: usize, cb: usize) -> bool {
    (1..=BLOCK_MAX).contains(&rb)
        && (1..=BLOCK_MAX).contains(&cb)
        && nrows > 0
        && nrows % rb == 0
        && ncols % cb == 0
}

/// Whether `blocks` whole `rb × cb` blocks stay within [`MAX_FILL`] times `nnz` entries and the
/// 32-bit index range.
pub fn fill_fits(blocks: usize, rb: usize, cb: usize, nnz: usize) -> bool {
    let closed = blocks as u64 * (rb * cb) as u64;
    closed < u32::MAX as u64 && closed as f64 <= MAX_FILL * nnz.max(1) as f64
}

/// The block pattern `(block row pointer, block columns)` of a canonical matrix with
/// `rb × cb` blocks, each block row's columns sorted; `None` when the blocks do not fit
/// ([`blocks_fit`]).
pub fn block_pattern<T: Scalar>(
    m: &CsrMatrix<T>,
    rb: usize,
    cb: usize,
) -> Option<(Vec<u32>, Vec<u32>)> {
    if !blocks_fit(m.nrows(), m.ncols(), rb, cb) {
        return None;
    }
    let nb = m.nrows() / rb;
    let mut bptr = Vec::with_capacity(nb + 1);
    let mut bcol = Vec::new();
    bptr.push(0u32);
    for bi in 0..nb {
        let start = bcol.len();
        for a in 0..rb {
            bcol.extend(m.row(bi * rb + a).0.iter().map(|&j| j / cb as u32));
        }
        bcol[start..].sort_unstable();
        let mut w = start;
        for q in start..bcol.len() {
            if q == start || bcol[q] != bcol[w - 1] {
                bcol[w] = bcol[q];
                w += 1;
            }
        }
        bcol.truncate(w);
        bptr.push(bcol.len() as u32);
    }
    Some((bptr, bcol))
}

/// The pattern of the product of two patterns (`a` with `nbc` block columns = `b`'s rows),
/// rows sorted.
fn pattern_product(a: (&[u32], &[u32]), b: (&[u32], &[u32]), ncols: usize) -> (Vec<u32>, Vec<u32>) {
    let (ap, ac) = a;
    let (bp, bc) = b;
    let mut mark = vec![u32::MAX; ncols];
    let mut ptr = Vec::with_capacity(ap.len());
    let mut col = Vec::new();
    ptr.push(0u32);
    for i in 0..ap.len() - 1 {
        let start = col.len();
        for &k in &ac[ap[i] as usize..ap[i + 1] as usize] {
            for &j in &bc[bp[k as usize] as usize..bp[k as usize + 1] as usize] {
                if mark[j as usize] != i as u32 {
                    mark[j as usize] = i as u32;
                    col.push(j);
                }
            }
        }
        col[start..].sort_unstable();
        ptr.push(col.len() as u32);
    }
    (ptr, col)
}

/// The pattern of `R·A·P` stored by whole `kc × kc` blocks, and where the entries of the scalar
/// product `R·A·P` sit in it: [`BlockClosure::apply`] turns the scalar product into the product
/// by blocks (for new values on the same patterns too).
#[derive(Clone, Debug)]
pub struct BlockClosure {
    nrows: usize,
    ncols: usize,
    row_ptr: Vec<u32>,
    col_idx: Vec<u32>,
    /// The scalar product's pattern, and each of its entries' position in the closed one.
    scalar_row_ptr: Vec<u32>,
    scalar_col_idx: Vec<u32>,
    pos: Vec<u32>,
}

impl BlockClosure {
    /// The closure of `ac = R·A·P` (the scalar product of these matrices) for `A` with
    /// `ka × ka` blocks and `P` with `ka × kc` blocks; `None` when a matrix does not take the
    /// block path ([`blocks_fit`], [`fill_fits`]).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the shapes do not chain or `ac` has an entry outside the
    /// product of the block patterns (it is not the product of these matrices).
    pub fn new<T: Scalar>(
        r: &CsrMatrix<T>,
        a: &CsrMatrix<T>,
        p: &CsrMatrix<T>,
        ka: usize,
        kc: usize,
        ac: &CsrMatrix<T>,
    ) -> Result<Option<Self>> {
        if r.ncols() != a.nrows()
            || a.ncols() != p.nrows()
            || (ac.nrows(), ac.ncols()) != (r.nrows(), p.ncols())
        {
            return Err(Error::InvalidInput(format!(
                "block Galerkin: R {}×{}, A {}×{}, P {}×{}, R·A·P {}×{} do not chain",
                r.nrows(),
                r.ncols(),
                a.nrows(),
                a.ncols(),
                p.nrows(),
                p.ncols(),
                ac.nrows(),
                ac.ncols()
            )));
        }
        let view = |m: &CsrMatrix<T>, rb: usize, cb: usize| {
            block_pattern(m, rb, cb).filter(|(_, bcol)| fill_fits(bcol.len(), rb, cb, m.nnz()))
        };
        let (Some(rb), Some(ab), Some(pb)) = (view(r, kc, ka), view(a, ka, ka), view(p, ka, kc))
        else {
            return Ok(None);
        };
        let ra = pattern_product((&rb.0, &rb.1), (&ab.0, &ab.1), a.ncols() / ka);
        let (cptr, ccol) = pattern_product((&ra.0, &ra.1), (&pb.0, &pb.1), p.ncols() / kc);
        let (nrows, ncols) = (ac.nrows(), ac.ncols());
        let mut row_ptr = Vec::with_capacity(nrows + 1);
        let mut col_idx = Vec::with_capacity(ccol.len() * kc * kc);
        for bi in 0..cptr.len() - 1 {
            let blocks = &ccol[cptr[bi] as usize..cptr[bi + 1] as usize];
            for _ in 0..kc {
                row_ptr.push(col_idx.len() as u32);
                for &bj in blocks {
                    col_idx.extend((0..kc as u32).map(|b| bj * kc as u32 + b));
                }
            }
        }
        row_ptr.push(col_idx.len() as u32);
        let mut pos = Vec::with_capacity(ac.nnz());
        for i in 0..nrows {
            let row = &col_idx[row_ptr[i] as usize..row_ptr[i + 1] as usize];
            let mut q = 0;
            for &j in ac.row(i).0 {
                while q < row.len() && row[q] < j {
                    q += 1;
                }
                if q == row.len() || row[q] != j {
                    return Err(Error::InvalidInput(format!(
                        "block Galerkin: entry ({i}, {j}) of R·A·P lies outside the product of \
                         the block patterns"
                    )));
                }
                pos.push(row_ptr[i] + q as u32);
            }
        }
        Ok(Some(BlockClosure {
            nrows,
            ncols,
            row_ptr,
            col_idx,
            scalar_row_ptr: ac.row_ptr().to_vec(),
            scalar_col_idx: ac.col_idx().to_vec(),
            pos,
        }))
    }

    /// Entries of the product by blocks.
    pub fn nnz(&self) -> usize {
        self.col_idx.len()
    }

    /// The product by blocks from the scalar product `ac` (the pattern [`BlockClosure::new`]
    /// was given, any values).
    ///
    /// # Panics
    /// When `ac` has another pattern.
    pub fn apply<T: Scalar>(&self, ac: &CsrMatrix<T>) -> CsrMatrix<T> {
        assert!(
            ac.row_ptr() == self.scalar_row_ptr && ac.col_idx() == self.scalar_col_idx,
            "block closure: R·A·P's pattern differs from the one it was made for"
        );
        let mut val = vec![T::zero(); self.nnz()];
        for (&p, &v) in self.pos.iter().zip(ac.values()) {
            val[p as usize] = v;
        }
        CsrMatrix::try_from_parts(
            self.nrows,
            self.ncols,
            self.row_ptr.clone(),
            self.col_idx.clone(),
            val,
        )
        .expect("a closed pattern is canonical CSR")
    }
}

/// `R·A·P` stored by whole blocks (see the module docs); `None` when a matrix does not take the
/// block path.
///
/// # Errors
/// As [`crate::sparse::galerkin`] and [`BlockClosure::new`].
pub fn block_galerkin<T: Scalar>(
    r: &CsrMatrix<T>,
    a: &CsrMatrix<T>,
    p: &CsrMatrix<T>,
    ka: usize,
    kc: usize,
) -> Result<Option<CsrMatrix<T>>> {
    let ac = super::galerkin(r, a, p)?;
    Ok(BlockClosure::new(r, a, p, ka, kc, &ac)?.map(|c| c.apply(&ac)))
}
