//! Finite-element matrices assembled element by element, the way finite-element codes do.
//!
//! The mesh is the Kuhn (Freudenthal) triangulation of an `n × n` square (2 triangles per cell)
//! or an `n × n × n` cube (6 tetrahedra per cell, all sharing the cell's main diagonal), made
//! unstructured by mapping it onto the unit disc or ball (`y ↦ y·‖y‖∞/‖y‖₂` on `[−1, 1]^d`; the
//! default), and optionally by moving every interior vertex by up to 0.15 h per coordinate
//! (`jitter`, seeded: the only use of the seed). `cube` keeps the structured unit square or
//! cube.
//!
//! Elements are straight-sided P1 (linear) or P2 (quadratic) Lagrange simplices. P2 nodes are the
//! vertices followed by the edge midpoints; the global numbering is the vertices in grid order,
//! then the edges in the lexicographic order of their (lower, upper) vertex pairs — what a
//! NumPy-based code obtains with `np.unique` on sorted edge pairs. Vector problems (linear
//! elasticity) interleave the `d` displacement components of each node (`d·node + c`).
//!
//! Each element matrix comes from quadrature (one point for P1, the degree-2 rules with 3 points
//! in 2-D and 4 in 3-D for P2, exact for these integrands) in the vectorised form FEM codes use:
//! the weight times the test function's gradient, dotted with the trial function's gradient,
//! `Σ_k (w·|T|·∇φ_a)_k (∇φ_b)_k`, and for elasticity `Σ_r (w·|T|·B)_{ra} (D·B)_{rb}` with `D·B`
//! formed first. Neither is bit-symmetric: `K_ab` and `K_ba` round differently. The element
//! matrices are added into the global matrix in element order (the sparsity pattern is the
//! element connectivity, built first, as with a preallocated PETSc or deal.II matrix). The result
//! is symmetric only to rounding, and entries that vanish mathematically — many, on the
//! structured `cube`, where the Kuhn mesh's diagonal edges carry no Poisson coupling — are
//! stored as rounding noise of either sign (or an exact zero) and differ from their transposed
//! partners. That is what held-out users' matrices look like.
//!
//! Rows are assembled in parallel chunks, each looping over the elements incident to its rows in
//! ascending element order and keeping the contributions to its own rows: every entry is summed
//! in the same order as by one serial element loop, so the matrix does not depend on the number
//! of threads.
//!
//! Dirichlet conditions (the whole boundary for the Poisson problems; the face `x = min`, a
//! clamped end, for elasticity, whose other faces are traction-free) are applied after the
//! assembly in one of three ways codes use ([`Dirichlet`]): the boundary unknowns eliminated
//! (scikit-fem's `condense`; the default), their rows and columns zeroed with 1 on the diagonal
//! and the zeros kept as stored entries (PETSc's `MatZeroRowsColumns`), or their rows only
//! replaced by identity rows, the columns kept (legacy FEniCS `DirichletBC.apply`): the last is
//! not symmetric, even structurally.

use rayon::prelude::*;

use super::{check_rows, splitmix64, too_big, CHUNK_ROWS};
use crate::error::{Error, Result};
use crate::{CsrMatrix, Scalar};

/// The polynomial order of the Lagrange elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FemOrder {
    /// Linear: one node per vertex.
    P1,
    /// Quadratic: a node per vertex and per edge.
    P2,
}

/// The equation being discretised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FemPhysics {
    /// `−Δu = f`, Dirichlet on the whole boundary: symmetric positive definite.
    Poisson,
    /// Isotropic linear elasticity (E = 10⁵, ν = 0.3; plane strain in 2-D), clamped on the face
    /// `x = min`: symmetric positive definite, `d` unknowns per node.
    Elasticity,
}

/// The domain the structured mesh is laid on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FemDomain {
    /// The unit disc or ball: `[−1, 1]^d` mapped by `y ↦ y·‖y‖∞/‖y‖₂` (every element a
    /// different shape).
    Ball,
    /// The unit square or cube, structured.
    Cube,
}

/// How the Dirichlet unknowns enter the matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dirichlet {
    /// Removed: the matrix holds the free unknowns only.
    Eliminate,
    /// Rows and columns zeroed (the zeros stay stored), 1 on the diagonal: symmetric.
    Identity,
    /// Rows replaced by identity rows (zeros stored), columns kept: unsymmetric.
    IdentityRows,
}

/// A finite-element problem: dimension, equation, element order, domain and boundary handling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FemProblem {
    /// 2 (triangles) or 3 (tetrahedra).
    pub dim: usize,
    /// The equation.
    pub physics: FemPhysics,
    /// P1 or P2.
    pub order: FemOrder,
    /// Disc/ball or square/cube.
    pub domain: FemDomain,
    /// Move every interior vertex by up to 0.15 h per coordinate (seeded).
    pub jitter: bool,
    /// The Dirichlet handling.
    pub dirichlet: Dirichlet,
}

impl FemProblem {
    /// The problem on the disc or ball, unjittered, Dirichlet unknowns eliminated.
    pub fn new(dim: usize, physics: FemPhysics, order: FemOrder) -> Self {
        FemProblem {
            dim,
            physics,
            order,
            domain: FemDomain::Ball,
            jitter: false,
            dirichlet: Dirichlet::Eliminate,
        }
    }

    /// Reads the spec arguments after the name: `p1|p2`, `N`, then any of `ball`, `cube`,
    /// `jitter`, `elim`, `ident`, `rows`. Returns the problem and `N`, or why not.
    pub(super) fn parse(
        dim: usize,
        physics: FemPhysics,
        args: &[&str],
    ) -> std::result::Result<(FemProblem, usize), String> {
        let order = match args.first().map(|s| s.to_ascii_lowercase()) {
            Some(o) if o == "p1" => FemOrder::P1,
            Some(o) if o == "p2" => FemOrder::P2,
            Some(o) => return Err(format!("element order '{o}' is not p1 or p2")),
            None => return Err("missing the element order (p1 or p2)".into()),
        };
        let n = match args.get(1) {
            Some(s) => s
                .replace('_', "")
                .parse::<usize>()
                .map_err(|_| format!("N '{s}' is not a non-negative integer"))?,
            None => return Err("missing N".into()),
        };
        let mut p = FemProblem::new(dim, physics, order);
        for o in &args[2..] {
            match o.to_ascii_lowercase().as_str() {
                "ball" => p.domain = FemDomain::Ball,
                "cube" => p.domain = FemDomain::Cube,
                "jitter" => p.jitter = true,
                "elim" => p.dirichlet = Dirichlet::Eliminate,
                "ident" => p.dirichlet = Dirichlet::Identity,
                "rows" => p.dirichlet = Dirichlet::IdentityRows,
                other => {
                    return Err(format!(
                        "option '{other}' is not one of ball, cube, jitter, elim, ident, rows"
                    ))
                }
            }
        }
        Ok((p, n))
    }
}

/// The assembled stiffness matrix of `problem` on a mesh of `n` cells per side (see the
/// [module docs](self)). Rows: the free unknowns (with [`Dirichlet::Eliminate`]) or all of
/// them. `seed` only moves the vertices with `jitter`.
///
/// | problem | unknowns (before the boundary) | entries per row (mean, measured) |
/// |---|---|---|
/// | 2-D P1 / P2 Poisson | (n+1)² / (2n+1)² | 7 / 11.5 |
/// | 3-D P1 / P2 Poisson | (n+1)³ / (2n+1)³ | 15 / 28 |
/// | 2-D P1 / P2 elasticity | 2(n+1)² / 2(2n+1)² | 14 / 23 |
/// | 3-D P1 / P2 elasticity | 3(n+1)³ / 3(2n+1)³ | 43 / 81 |
///
/// # Errors
/// [`Error::InvalidInput`] for a dimension other than 2 or 3, `n = 0`, or a size beyond the
/// 32-bit index limit.
pub fn fem<T: Scalar>(problem: &FemProblem, n: usize, seed: u64) -> Result<CsrMatrix<T>> {
    let mesh = Mesh::new(problem, n, seed)?;
    let a = mesh.assemble()?;
    let (nr, nc) = (a.nrows(), a.ncols());
    let (rp, ci, v) = a.into_parts();
    let v: Vec<T> = v.into_iter().map(T::of_f64).collect();
    // SAFETY: the parts of a checked matrix with the values mapped one to one.
    Ok(unsafe { CsrMatrix::from_parts_unchecked(nr, nc, rp, ci, v) })
}

/// The coordinates `[x, y, z]` (`z = 0` in 2-D) of the nodes of [`fem`]'s matrix, one per node
/// whose unknowns are rows (in row order; a vector problem has `dim` rows per node): what
/// rigid-body modes and geometric multigrid need.
///
/// # Errors
/// As [`fem`].
pub fn fem_coordinates(problem: &FemProblem, n: usize, seed: u64) -> Result<Vec<[f64; 3]>> {
    let mesh = Mesh::new(problem, n, seed)?;
    Ok((0..mesh.nnodes())
        .filter(|&node| {
            problem.dirichlet != Dirichlet::Eliminate || !mesh.node_fixed(mesh.decode(node))
        })
        .map(|node| mesh.node_coord(mesh.decode(node)))
        .collect())
}

/// Axis orders of the Kuhn simplices of a cell: simplex `q` walks from the cell's starting
/// corner along the axes `PERMS[q]` in turn.
const PERMS3: [[usize; 3]; 6] = [
    [0, 1, 2],
    [0, 2, 1],
    [1, 0, 2],
    [1, 2, 0],
    [2, 0, 1],
    [2, 1, 0],
];
const PERMS2: [[usize; 3]; 2] = [[0, 1, 2], [1, 0, 2]];
/// The odd axis orders of `PERMS3` (and `PERMS2`'s second).
const ODD3: [bool; 6] = [false, true, true, false, false, true];

/// Degree-2 quadrature on the tetrahedron (barycentric points, weights summing to 1).
const TET_A: f64 = 0.585_410_196_624_968_5;
const TET_B: f64 = 0.138_196_601_125_010_5;

/// The structured simplex mesh and the node numbering of one problem.
///
/// Every cell is split into Kuhn simplices along its diagonal from the corner nearest the centre
/// of the grid to the farthest one (the Kuhn triangulation reflected in the middle of every
/// axis; in 2-D the "Union Jack" pattern). The triangulation stays conforming (a face's
/// diagonal depends only on the reflections of the axes in its plane), and no simplex of a
/// boundary cell has all its vertices on the boundary, so mapping the cube onto the ball
/// flattens none (the plain Kuhn mesh has such simplices along the cube's edges).
struct Mesh {
    p: FemProblem,
    d: usize,
    n: usize,
    /// Vertices per side, `n + 1`.
    s: usize,
    nv: usize,
    /// P2: the edges, `lower << 32 | upper` vertex ids, sorted.
    edges: Vec<u64>,
    coords: Vec<[f64; 3]>,
    /// Unknowns per node.
    comp: usize,
    /// The quadrature rule: barycentric points and weights (summing to 1).
    quad: Vec<([f64; 4], f64)>,
}

/// Work arrays of one element matrix: the matrix (row-major), the basis gradients, and for
/// elasticity the strain-displacement matrix `B` and `D·B` (Voigt rows).
#[derive(Default)]
struct Scratch {
    k: Vec<f64>,
    g: Vec<[f64; 3]>,
    bm: Vec<f64>,
    db: Vec<f64>,
}

/// Assembled rows: their lengths, columns and values.
type Rows = (Vec<u32>, Vec<u32>, Vec<f64>);

/// A node: the vertex `a` (`a == b`) or the midpoint of the edge from vertex `a` to `b > a`.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Node {
    a: usize,
    b: usize,
}

impl Mesh {
    fn new(p: &FemProblem, n: usize, seed: u64) -> Result<Mesh> {
        let d = p.dim;
        if d != 2 && d != 3 {
            return Err(Error::InvalidInput(format!(
                "finite elements in {d} dimensions: only 2 and 3 are generated"
            )));
        }
        if n == 0 {
            return Err(Error::InvalidInput(
                "finite elements: N (cells per side) must be at least 1".into(),
            ));
        }
        let s = n + 1;
        let nv128 = (s as u128).pow(d as u32);
        let comp = match p.physics {
            FemPhysics::Poisson => 1,
            FemPhysics::Elasticity => d,
        };
        // Nodes: (n+1)^d vertices, and for P2 fewer than (2n+1)^d with the edges; elements
        // d!·n^d.
        let nodes_bound = match p.order {
            FemOrder::P1 => nv128,
            FemOrder::P2 => (2 * n as u128 + 1).pow(d as u32),
        };
        let rows = nodes_bound * comp as u128;
        check_rows(rows)?;
        // Every interior row couples at least the 7 (2-D) or 15 (3-D) nodes of a P1 patch.
        let entries = rows * comp as u128 * if d == 3 { 15 } else { 7 } / 2;
        if entries > u32::MAX as u128 {
            return Err(too_big("entries (or more)", entries));
        }
        let nelem = (n as u128).pow(d as u32) * if d == 3 { 6 } else { 2 };
        if nelem > u32::MAX as u128 {
            return Err(too_big("elements", nelem));
        }
        let mut mesh = Mesh {
            p: *p,
            d,
            n,
            s,
            nv: nv128 as usize,
            edges: Vec::new(),
            coords: Vec::new(),
            comp,
            quad: match (p.order, d) {
                (FemOrder::P1, 2) => vec![([1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0, 0.0], 1.0)],
                (FemOrder::P1, _) => vec![([0.25; 4], 1.0)],
                (FemOrder::P2, 2) => (0..3)
                    .map(|i| {
                        let mut l = [1.0 / 6.0, 1.0 / 6.0, 1.0 / 6.0, 0.0];
                        l[i] = 2.0 / 3.0;
                        (l, 1.0 / 3.0)
                    })
                    .collect(),
                (FemOrder::P2, _) => (0..4)
                    .map(|i| {
                        let mut l = [TET_B; 4];
                        l[i] = TET_A;
                        (l, 0.25)
                    })
                    .collect(),
            },
        };
        if p.order == FemOrder::P2 {
            let m = &mesh;
            let mut edges: Vec<u64> = (0..m.nelem())
                .into_par_iter()
                .flat_map_iter(|e| {
                    let v = m.simplex(e);
                    let mut out = Vec::with_capacity(6);
                    for i in 0..=d {
                        for j in i + 1..=d {
                            let (lo, hi) = (v[i].min(v[j]), v[i].max(v[j]));
                            out.push(((lo as u64) << 32) | hi as u64);
                        }
                    }
                    out
                })
                .collect();
            edges.par_sort_unstable();
            edges.dedup();
            mesh.edges = edges;
        }
        mesh.coords = (0..mesh.nv)
            .into_par_iter()
            .map(|v| mesh.place(v, seed))
            .collect();
        Ok(mesh)
    }

    fn pos(&self, v: usize) -> [usize; 3] {
        let s = self.s;
        [
            v % s,
            (v / s) % s,
            if self.d == 3 { v / (s * s) } else { 0 },
        ]
    }

    fn vid(&self, p: [usize; 3]) -> usize {
        p[0] + self.s * (p[1] + self.s * p[2])
    }

    fn perms(&self) -> &'static [[usize; 3]] {
        if self.d == 3 {
            &PERMS3
        } else {
            &PERMS2
        }
    }

    fn nnodes(&self) -> usize {
        self.nv + self.edges.len()
    }

    fn node_id(&self, node: Node) -> usize {
        if node.a == node.b {
            return node.a;
        }
        let key = ((node.a as u64) << 32) | node.b as u64;
        self.nv + self.edges.binary_search(&key).expect("an edge of the mesh")
    }

    fn decode(&self, id: usize) -> Node {
        if id < self.nv {
            return Node { a: id, b: id };
        }
        let key = self.edges[id - self.nv];
        Node {
            a: (key >> 32) as usize,
            b: (key & 0xFFFF_FFFF) as usize,
        }
    }

    /// The node carries a Dirichlet condition: it lies on the boundary (Poisson), or on the face
    /// `x = min` (elasticity).
    fn node_fixed(&self, node: Node) -> bool {
        let (pa, pb) = (self.pos(node.a), self.pos(node.b));
        let on = |k: usize| pa[k] == pb[k] && (pa[k] == 0 || pa[k] == self.n);
        match self.p.physics {
            FemPhysics::Poisson => (0..self.d).any(on),
            FemPhysics::Elasticity => pa[0] == 0 && pb[0] == 0,
        }
    }

    fn node_coord(&self, node: Node) -> [f64; 3] {
        let (a, b) = (self.coords[node.a], self.coords[node.b]);
        if node.a == node.b {
            return a;
        }
        [
            0.5 * (a[0] + b[0]),
            0.5 * (a[1] + b[1]),
            0.5 * (a[2] + b[2]),
        ]
    }

    /// The coordinates of vertex `v`.
    fn place(&self, v: usize, seed: u64) -> [f64; 3] {
        let pos = self.pos(v);
        let n = self.n as f64;
        let interior = (0..self.d).all(|k| pos[k] > 0 && pos[k] < self.n);
        let mut x = [0.0; 3];
        for k in 0..self.d {
            x[k] = pos[k] as f64;
            if self.p.jitter && interior {
                let h = splitmix64(seed ^ splitmix64((v as u64) * 4 + k as u64));
                let u = (h >> 11) as f64 / (1u64 << 53) as f64;
                x[k] += 0.15 * (2.0 * u - 1.0);
            }
            x[k] /= n;
        }
        if self.p.domain == FemDomain::Ball {
            let y: Vec<f64> = x[..self.d].iter().map(|&t| 2.0 * t - 1.0).collect();
            let inf = y.iter().fold(0.0f64, |m, t| m.max(t.abs()));
            let two = y.iter().map(|t| t * t).sum::<f64>().sqrt();
            let scale = if two > 0.0 { inf / two } else { 0.0 };
            for k in 0..self.d {
                x[k] = y[k] * scale;
            }
        }
        x
    }

    fn nelem(&self) -> usize {
        self.n.pow(self.d as u32) * self.perms().len()
    }

    /// Element `e`'s cell (its lower corner), axis order and reflections (bit `k`: the cell
    /// lies in the upper half of axis `k`, and its simplices walk downwards along it).
    fn cell_of(&self, e: usize) -> ([usize; 3], usize, usize) {
        let np = self.perms().len();
        let (cell, q) = (e / np, e % np);
        let n = self.n;
        let c = [
            cell % n,
            (cell / n) % n,
            if self.d == 3 { cell / (n * n) } else { 0 },
        ];
        let flip = (0..self.d)
            .filter(|&k| 2 * c[k] + 1 > n)
            .fold(0, |f, k| f | 1 << k);
        (c, q, flip)
    }

    /// The vertex ids of element `e` along its Kuhn path (`d + 1` of them).
    fn simplex(&self, e: usize) -> [usize; 4] {
        let (c, q, flip) = self.cell_of(e);
        let perm = self.perms()[q];
        let mut p = c;
        for (k, pk) in p.iter_mut().enumerate().take(self.d) {
            *pk += flip >> k & 1;
        }
        let mut v = [0usize; 4];
        v[0] = self.vid(p);
        for j in 0..self.d {
            let k = perm[j];
            if flip >> k & 1 == 1 {
                p[k] -= 1;
            } else {
                p[k] += 1;
            }
            v[j + 1] = self.vid(p);
        }
        v
    }

    /// The element's nodes in local order: the `d + 1` vertices along the Kuhn path, then (P2)
    /// the edges (i, j), i < j, lexicographically.
    fn element_nodes(&self, e: usize, out: &mut Vec<Node>) {
        out.clear();
        let v = self.simplex(e);
        for &a in &v[..=self.d] {
            out.push(Node { a, b: a });
        }
        if self.p.order == FemOrder::P2 {
            for i in 0..=self.d {
                for j in i + 1..=self.d {
                    out.push(Node {
                        a: v[i].min(v[j]),
                        b: v[i].max(v[j]),
                    });
                }
            }
        }
    }

    /// Pushes the elements that contain `node` (both ends of an edge) onto `out`, ascending.
    #[cfg(test)]
    fn incident(&self, node: Node, out: &mut Vec<u32>) {
        let (pa, pb) = (self.pos(node.a), self.pos(node.b));
        let n = self.n;
        let np = self.perms().len();
        // Candidate cells: those whose closure holds both ends.
        let mut lo = [0usize; 3];
        let mut cnt = [1usize; 3];
        for k in 0..self.d {
            let (mn, mx) = (pa[k].min(pb[k]), pa[k].max(pb[k]));
            let first = mx.saturating_sub(1);
            let last = mn.min(n - 1);
            lo[k] = first;
            cnt[k] = (last + 1).saturating_sub(first);
        }
        let start = out.len();
        for z in 0..cnt[2] {
            for y in 0..cnt[1] {
                for x in 0..cnt[0] {
                    let c = [lo[0] + x, lo[1] + y, lo[2] + z];
                    let cell = c[0] + n * (c[1] + n * c[2]);
                    for q in 0..np {
                        let e = cell * np + q;
                        let v = self.simplex(e);
                        let v = &v[..=self.d];
                        if v.contains(&node.a) && v.contains(&node.b) {
                            out.push(e as u32);
                        }
                    }
                }
            }
        }
        out[start..].sort_unstable();
    }

    /// The element matrix of `e` into `k` (row-major, `nodes·comp` square); `nodes` holds the
    /// element's nodes. Returns false for an inverted or degenerate element.
    fn element_matrix(&self, e: usize, nodes: &[Node], sc: &mut Scratch) -> bool {
        let d = self.d;
        let mut p = [[0.0; 3]; 4];
        for (pi, nd) in p.iter_mut().zip(&nodes[..=d]) {
            *pi = self.coords[nd.a];
        }
        // J[r][c] = p_{c+1}[r] − p_0[r]; ∇λ_{c+1} is row c of J⁻¹.
        let mut j = [[0.0; 3]; 3];
        for (r, jr) in j.iter_mut().enumerate().take(d) {
            for c in 0..d {
                jr[c] = p[c + 1][r] - p[0][r];
            }
        }
        let (det, inv) = if d == 2 {
            let det = j[0][0] * j[1][1] - j[0][1] * j[1][0];
            let inv = [
                [j[1][1] / det, -j[0][1] / det, 0.0],
                [-j[1][0] / det, j[0][0] / det, 0.0],
                [0.0; 3],
            ];
            (det, inv)
        } else {
            let det = j[0][0] * (j[1][1] * j[2][2] - j[1][2] * j[2][1])
                - j[0][1] * (j[1][0] * j[2][2] - j[1][2] * j[2][0])
                + j[0][2] * (j[1][0] * j[2][1] - j[1][1] * j[2][0]);
            let mut inv = [[0.0; 3]; 3];
            for (r, ir) in inv.iter_mut().enumerate() {
                for (c, v) in ir.iter_mut().enumerate() {
                    // inv[r][c] = cofactor(c, r) / det.
                    let (r1, r2) = ((c + 1) % 3, (c + 2) % 3);
                    let (c1, c2) = ((r + 1) % 3, (r + 2) % 3);
                    *v = (j[r1][c1] * j[r2][c2] - j[r1][c2] * j[r2][c1]) / det;
                }
            }
            (det, inv)
        };
        // Kuhn simplices alternate in orientation with the parity of their axis order, and
        // each reflection turns them over.
        let (_, q, flip) = self.cell_of(e);
        let odd = (if d == 3 { ODD3[q] } else { q == 1 }) ^ (flip.count_ones() % 2 == 1);
        let signed = if odd { -det } else { det };
        if signed.is_nan() || signed <= 0.0 || signed.is_infinite() {
            return false;
        }
        let vol = signed / if d == 3 { 6.0 } else { 2.0 };
        let mut glam = [[0.0; 3]; 4];
        for c in 0..d {
            glam[c + 1] = inv[c];
            for r in 0..3 {
                glam[0][r] -= inv[c][r];
            }
        }
        let nn = nodes.len();
        let m = nn * self.comp;
        let Scratch { k, g, bm, db } = sc;
        k.clear();
        k.resize(m * m, 0.0);
        g.clear();
        g.resize(nn, [0.0; 3]);
        let (e_mod, nu) = (1e5, 0.3);
        let lame = e_mod * nu / ((1.0 + nu) * (1.0 - 2.0 * nu));
        let mu = e_mod / (2.0 + 2.0 * nu);
        let nvoigt = if d == 3 { 6 } else { 3 };
        bm.clear();
        bm.resize(nvoigt * m, 0.0);
        db.clear();
        db.resize(nvoigt * m, 0.0);
        for (lam, w) in &self.quad {
            // Basis gradients at this point.
            for i in 0..=d {
                let f = match self.p.order {
                    FemOrder::P1 => 1.0,
                    FemOrder::P2 => 4.0 * lam[i] - 1.0,
                };
                g[i] = [f * glam[i][0], f * glam[i][1], f * glam[i][2]];
            }
            let mut q = d + 1;
            if self.p.order == FemOrder::P2 {
                for a in 0..=d {
                    for b in a + 1..=d {
                        for r in 0..3 {
                            g[q][r] = 4.0 * (lam[a] * glam[b][r] + lam[b] * glam[a][r]);
                        }
                        q += 1;
                    }
                }
            }
            let wv = w * vol;
            match self.p.physics {
                FemPhysics::Poisson => {
                    for a in 0..nn {
                        let ga = [wv * g[a][0], wv * g[a][1], wv * g[a][2]];
                        for b in 0..nn {
                            k[a * m + b] += (0..d).map(|r| ga[r] * g[b][r]).sum::<f64>();
                        }
                    }
                }
                FemPhysics::Elasticity => {
                    bm.iter_mut().for_each(|v| *v = 0.0);
                    for (a, ga) in g.iter().enumerate() {
                        let c0 = d * a;
                        for r in 0..d {
                            bm[r * m + c0 + r] = ga[r];
                        }
                        if d == 3 {
                            bm[3 * m + c0] = ga[1];
                            bm[3 * m + c0 + 1] = ga[0];
                            bm[4 * m + c0 + 1] = ga[2];
                            bm[4 * m + c0 + 2] = ga[1];
                            bm[5 * m + c0] = ga[2];
                            bm[5 * m + c0 + 2] = ga[0];
                        } else {
                            bm[2 * m + c0] = ga[1];
                            bm[2 * m + c0 + 1] = ga[0];
                        }
                    }
                    for col in 0..m {
                        let tr: f64 = (0..d).map(|r| bm[r * m + col]).sum();
                        for r in 0..d {
                            db[r * m + col] = lame * tr + 2.0 * mu * bm[r * m + col];
                        }
                        for r in d..nvoigt {
                            db[r * m + col] = mu * bm[r * m + col];
                        }
                    }
                    for a in 0..m {
                        for b in 0..m {
                            k[a * m + b] += (0..nvoigt)
                                .map(|r| (wv * bm[r * m + a]) * db[r * m + b])
                                .sum::<f64>();
                        }
                    }
                }
            }
        }
        true
    }

    /// Assembles the matrix with the Dirichlet conditions applied.
    fn assemble(&self) -> Result<CsrMatrix<f64>> {
        let comp = self.comp;
        let nnodes = self.nnodes();
        let nrows = nnodes * comp;
        let fixed: Vec<bool> = (0..nnodes)
            .into_par_iter()
            .map(|id| self.node_fixed(self.decode(id)))
            .collect();
        let elim = self.p.dirichlet == Dirichlet::Eliminate;
        // With elimination: the new index of every kept row.
        let mut newid = vec![u32::MAX; if elim { nrows } else { 0 }];
        let mut kept = 0u32;
        if elim {
            for (r, slot) in newid.iter_mut().enumerate() {
                if !fixed[r / comp] {
                    *slot = kept;
                    kept += 1;
                }
            }
        }
        // Chunks of nodes, the vertices apart from the edges (each chunk's elements lie in a
        // few layers of cells). The chunking does not change the result.
        let parts = (2 * rayon::current_num_threads()).max(1);
        let mut chunks = Vec::new();
        for range in [0..self.nv, self.nv..nnodes] {
            let len = range.len();
            if len == 0 {
                continue;
            }
            let step = len.div_ceil(parts).max(CHUNK_ROWS / comp).min(len);
            let mut a = range.start;
            while a < range.end {
                chunks.push(a..(a + step).min(range.end));
                a += step;
            }
        }
        let pieces: Vec<Result<Rows>> = chunks
            .into_par_iter()
            .map(|nodes| self.assemble_rows(nodes, &fixed, &newid))
            .collect();
        let out_rows = if elim { kept as usize } else { nrows };
        let mut row_ptr = Vec::with_capacity(out_rows + 1);
        row_ptr.push(0u32);
        let (mut cols, mut vals) = (Vec::new(), Vec::new());
        let mut acc = 0u64;
        for piece in pieces {
            let (lens, c, v) = piece?;
            for l in lens {
                acc += l as u64;
                if acc > u32::MAX as u64 {
                    return Err(too_big("entries (or more)", acc as u128));
                }
                row_ptr.push(acc as u32);
            }
            cols.extend_from_slice(&c);
            vals.extend_from_slice(&v);
        }
        CsrMatrix::try_from_parts(out_rows, out_rows, row_ptr, cols, vals)
    }

    /// The ids of the elements that may hold a node of `nodes` (a range of vertices or of
    /// edges): the cells of the layers (z in 3-D, y in 2-D) around the nodes' lower vertices.
    fn candidates(&self, nodes: &std::ops::Range<usize>) -> std::ops::Range<usize> {
        let lower = |id: usize| self.decode(id).a;
        let layer = |v: usize| self.pos(v)[self.d - 1];
        let (lo, hi) = (layer(lower(nodes.start)), layer(lower(nodes.end - 1)));
        let per_layer = self.n.pow(self.d as u32 - 1) * self.perms().len();
        lo.saturating_sub(1) * per_layer..hi.min(self.n - 1).saturating_add(1) * per_layer
    }

    /// The rows of the unknowns of `nodes` (original numbering): their lengths, columns and
    /// values after the Dirichlet handling (rows of eliminated unknowns left out).
    fn assemble_rows(
        &self,
        nodes: std::ops::Range<usize>,
        fixed: &[bool],
        newid: &[u32],
    ) -> Result<Rows> {
        let comp = self.comp;
        let rows = nodes.start * comp..nodes.end * comp;
        let mut local = Vec::with_capacity(10);
        let mut ids: Vec<usize> = Vec::with_capacity(30);
        let unknowns = |local: &[Node], ids: &mut Vec<usize>| {
            ids.clear();
            for nd in local {
                let id = self.node_id(*nd);
                for c in 0..comp {
                    ids.push(id * comp + c);
                }
            }
        };
        // The elements touching these rows, in ascending order, and the pattern: every
        // (row, column) pair they couple, gathered row by row (each row's few dozen columns
        // sorted on their own), then sorted and made distinct.
        let mut elems: Vec<u32> = Vec::new();
        // The unknowns of each element of `elems`, `m` apiece.
        let mut eids: Vec<u32> = Vec::new();
        let mut count = vec![0usize; rows.len() + 1];
        for e in self.candidates(&nodes) {
            self.element_nodes(e, &mut local);
            unknowns(&local, &mut ids);
            let mine = ids.iter().filter(|g| rows.contains(g)).count();
            if mine == 0 {
                continue;
            }
            elems.push(e as u32);
            eids.extend(ids.iter().map(|&g| g as u32));
            for &ga in ids.iter().filter(|g| rows.contains(g)) {
                count[ga - rows.start + 1] += ids.len();
            }
        }
        for i in 0..rows.len() {
            count[i + 1] += count[i];
        }
        let mut fill = count.clone();
        let mut raw = vec![0u32; count[rows.len()]];
        // Unknowns per element.
        let m = comp
            * match self.p.order {
                FemOrder::P1 => self.d + 1,
                FemOrder::P2 => (self.d + 1) * (self.d + 2) / 2,
            };
        for el in eids.chunks_exact(m) {
            for &ga in el.iter().filter(|&&g| rows.contains(&(g as usize))) {
                let at = &mut fill[ga as usize - rows.start];
                raw[*at..*at + m].copy_from_slice(el);
                *at += m;
            }
        }
        let mut ptr = Vec::with_capacity(rows.len() + 1);
        ptr.push(0usize);
        let mut cols: Vec<u32> = Vec::with_capacity(raw.len() / 4);
        for i in 0..rows.len() {
            let seg = &mut raw[count[i]..count[i + 1]];
            seg.sort_unstable();
            let start = cols.len();
            for &c in seg.iter() {
                if cols.len() == start || cols[cols.len() - 1] != c {
                    cols.push(c);
                }
            }
            ptr.push(cols.len());
        }
        drop(raw);
        // The element loop, in ascending element order, keeping these rows.
        let mut vals = vec![0.0f64; cols.len()];
        let mut sc = Scratch::default();
        for (&e, el) in elems.iter().zip(eids.chunks_exact(m)) {
            self.element_nodes(e as usize, &mut local);
            if !self.element_matrix(e as usize, &local, &mut sc) {
                return Err(Error::InvalidInput(format!(
                    "finite elements: element {e} of the mesh is inverted or degenerate \
                     (N = {} is too coarse for this domain)",
                    self.n
                )));
            }
            for (a, &ga) in el.iter().enumerate() {
                let ga = ga as usize;
                if !rows.contains(&ga) {
                    continue;
                }
                let lr = ga - rows.start;
                let row = &cols[ptr[lr]..ptr[lr + 1]];
                for (b, gb) in el.iter().enumerate() {
                    let at = row
                        .binary_search(gb)
                        .expect("the pattern holds every element coupling");
                    vals[ptr[lr] + at] += sc.k[a * m + b];
                }
            }
        }
        // The Dirichlet handling.
        let mut lens = Vec::with_capacity(rows.len());
        let (mut oc, mut ov) = (
            Vec::with_capacity(cols.len()),
            Vec::with_capacity(cols.len()),
        );
        for (lr, r) in rows.enumerate() {
            let (row, v) = (&cols[ptr[lr]..ptr[lr + 1]], &vals[ptr[lr]..ptr[lr + 1]]);
            let rfixed = fixed[r / comp];
            let before = oc.len();
            match self.p.dirichlet {
                Dirichlet::Eliminate => {
                    if rfixed {
                        continue;
                    }
                    for (&c, &x) in row.iter().zip(v) {
                        if !fixed[c as usize / comp] {
                            oc.push(newid[c as usize]);
                            ov.push(x);
                        }
                    }
                }
                Dirichlet::Identity | Dirichlet::IdentityRows => {
                    let cols_too = self.p.dirichlet == Dirichlet::Identity;
                    for (&c, &x) in row.iter().zip(v) {
                        oc.push(c);
                        ov.push(if rfixed {
                            if c as usize == r {
                                1.0
                            } else {
                                0.0
                            }
                        } else if cols_too && fixed[c as usize / comp] {
                            0.0
                        } else {
                            x
                        });
                    }
                }
            }
            lens.push((oc.len() - before) as u32);
        }
        Ok((lens, oc, ov))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(dim: usize, physics: FemPhysics, order: FemOrder) -> FemProblem {
        FemProblem::new(dim, physics, order)
    }

    /// Element matrices annihilate constants (Poisson) and rigid-body motions (elasticity), and
    /// each simplex has the volume its vertices say.
    #[test]
    fn element_matrices_annihilate_the_null_space() {
        for dim in [2, 3] {
            for order in [FemOrder::P1, FemOrder::P2] {
                for physics in [FemPhysics::Poisson, FemPhysics::Elasticity] {
                    let mut p = problem(dim, physics, order);
                    p.jitter = true;
                    let mesh = Mesh::new(&p, 3, 7).unwrap();
                    let (mut nodes, mut sc) = (Vec::new(), Scratch::default());
                    let mut total = 0.0;
                    for e in 0..mesh.nelem() {
                        mesh.element_nodes(e, &mut nodes);
                        assert!(mesh.element_matrix(e, &nodes, &mut sc));
                        let k = &sc.k;
                        let m = nodes.len() * mesh.comp;
                        let xs: Vec<[f64; 3]> =
                            nodes.iter().map(|&nd| mesh.node_coord(nd)).collect();
                        // Constants per component; for elasticity also a rotation in x-y.
                        let mut modes: Vec<Vec<f64>> = (0..mesh.comp)
                            .map(|c| (0..m).map(|i| (i % mesh.comp == c) as u8 as f64).collect())
                            .collect();
                        if physics == FemPhysics::Elasticity {
                            modes.push(
                                (0..m)
                                    .map(|i| match i % mesh.comp {
                                        0 => -xs[i / mesh.comp][1],
                                        1 => xs[i / mesh.comp][0],
                                        _ => 0.0,
                                    })
                                    .collect(),
                            );
                        }
                        let scale = k.iter().fold(0.0f64, |s, v| s.max(v.abs()));
                        for u in &modes {
                            for a in 0..m {
                                let r: f64 = (0..m).map(|b| k[a * m + b] * u[b]).sum();
                                assert!(r.abs() <= 1e-12 * scale, "{p:?} e{e} row {a}: {r}");
                            }
                        }
                        // A stiffness matrix has a positive diagonal.
                        for a in 0..m {
                            assert!(k[a * m + a] > 0.0);
                        }
                        total += 1.0;
                    }
                    assert_eq!(total as usize, mesh.nelem());
                }
            }
        }
    }

    /// Numbering: node ids and their decoding agree, and every element's nodes are incident.
    #[test]
    fn numbering_and_incidence_agree() {
        for dim in [2, 3] {
            let p = problem(dim, FemPhysics::Poisson, FemOrder::P2);
            let mesh = Mesh::new(&p, 3, 0).unwrap();
            assert_eq!(mesh.nnodes(), (2 * 3 + 1usize).pow(dim as u32));
            for id in 0..mesh.nnodes() {
                assert_eq!(mesh.node_id(mesh.decode(id)), id);
            }
            let mut nodes = Vec::new();
            let mut inc = Vec::new();
            let mut seen = vec![0usize; mesh.nnodes()];
            for e in 0..mesh.nelem() {
                mesh.element_nodes(e, &mut nodes);
                for nd in &nodes {
                    inc.clear();
                    mesh.incident(*nd, &mut inc);
                    assert!(inc.contains(&(e as u32)), "element {e} not incident");
                    seen[mesh.node_id(*nd)] += 1;
                }
            }
            for (id, &count) in seen.iter().enumerate() {
                inc.clear();
                mesh.incident(mesh.decode(id), &mut inc);
                assert_eq!(inc.len(), count, "node {id}");
                // The assembly's candidate elements of a node include all of them.
                let cand = mesh.candidates(&(id..id + 1));
                assert!(
                    inc.iter().all(|&e| cand.contains(&(e as usize))),
                    "node {id}"
                );
            }
        }
    }
}
