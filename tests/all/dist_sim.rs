//! The distributed decomposition and solvers on simulated ranks (CPU threads, no GPU or NCCL):
//! partitions, halo lists, index maps, the distributed product and CG/PCG/BiCGSTAB against the
//! single-process solve.

use segsparse::backend::{Cpu, Identity};
use segsparse::dist::{poisson3d_block, sim, DistPart, Partition, RowBlock};
use segsparse::precond::Jacobi;
use segsparse::solvers::{bicgstab, cg, pcg, SolveParams};
use segsparse::{generate, CsrMatrix};

use crate::common::dist::convection;

fn rhs(n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| 1.0 + ((i * 7919) % 13) as f64 / 13.0)
        .collect()
}

#[test]
fn partitions_cover_and_balance() {
    let a = generate::powerlaw::<f64>(3000, 2.0, 7).unwrap();
    for k in 1..=6 {
        let p = Partition::by_nnz(a.row_ptr(), k);
        assert_eq!(p.nranks(), k);
        assert_eq!(p.n(), 3000);
        assert_eq!(p.starts()[0], 0);
        let cost = |r: usize| {
            let rg = p.rows(r);
            (a.row_ptr()[rg.end as usize] - a.row_ptr()[rg.start as usize]) as u64 + rg.end
                - rg.start
        };
        let total = a.nnz() as u64 + 3000;
        let max_row = (0..3000)
            .map(|i| a.row(i).0.len() as u64 + 1)
            .max()
            .unwrap();
        for r in 0..k {
            // Each block is within one row's cost of the ideal share.
            assert!(
                cost(r) <= total / k as u64 + max_row + 1,
                "rank {r} of {k}: cost {}",
                cost(r)
            );
            for g in p.rows(r) {
                assert_eq!(p.owner(g), r);
            }
        }
    }
    let p = Partition::by_rows(10, 4);
    assert_eq!(p.starts(), &[0, 2, 5, 7, 10]);
    // Empty blocks: more ranks than rows.
    let p = Partition::by_rows(2, 4);
    assert_eq!(p.owner(0), 1);
    assert_eq!(p.owner(1), 3);
    assert!(Partition::from_starts(vec![0, 3, 2]).is_err());
}

#[test]
fn poisson3d_blocks_match_the_global_generator() {
    let n = 7usize;
    let a = generate::poisson3d::<f64>(n).unwrap();
    let p = Partition::by_rows((n * n * n) as u64, 3);
    for r in 0..3 {
        let g = poisson3d_block::<f64>((n as u64, n as u64, n as u64), p.rows(r)).unwrap();
        assert_eq!(g, RowBlock::from_csr(&a, p.rows(r)).unwrap());
    }
    assert!(poisson3d_block::<f64>((2, 2, 2), 0..9).is_err());
    assert!(poisson3d_block::<f64>((0, 2, 2), 0..0).is_err());
}

/// Builds every rank's part in one process, the exchange being the transpose of the need lists.
fn parts(a: &CsrMatrix<f64>, p: &Partition) -> Vec<DistPart<f64>> {
    let k = p.nranks();
    let blocks: Vec<_> = (0..k)
        .map(|r| RowBlock::from_csr(a, p.rows(r)).unwrap())
        .collect();
    sim::run(k, |comm| {
        let r = comm.rank();
        DistPart::build(&blocks[r], p, r, |need| Ok(comm.all_to_all(need))).unwrap()
    })
}

#[test]
fn halo_lists_and_index_maps() {
    let mats = [
        generate::poisson2d::<f64>(13).unwrap(),
        generate::random::<f64>(400, 9, 3).unwrap(),
        convection(11, 0.4),
    ];
    for a in &mats {
        for k in [1, 2, 3, 5] {
            let p = Partition::by_nnz(a.row_ptr(), k);
            let ps = parts(a, &p);
            for (r, part) in ps.iter().enumerate() {
                let rows = p.rows(r);
                assert_eq!(part.first_row, rows.start);
                assert_eq!(part.n_owned() as u64, rows.end - rows.start);
                // The halo is exactly the set of off-block columns of the rank's rows.
                let mut want: Vec<u64> = (rows.start..rows.end)
                    .flat_map(|i| a.row(i as usize).0.iter().map(|&c| c as u64))
                    .filter(|c| !rows.contains(c))
                    .collect();
                want.sort_unstable();
                want.dedup();
                assert_eq!(part.halo_global, want, "rank {r} of {k}");
                // Index maps are inverse to each other.
                for l in 0..part.n_owned() + part.n_halo() {
                    assert_eq!(part.global_to_local(part.local_to_global(l)), Some(l));
                }
                let outside =
                    (0..a.nrows() as u64).find(|g| !rows.contains(g) && !want.contains(g));
                if let Some(g) = outside {
                    assert_eq!(part.global_to_local(g), None);
                }
                // Every receive range comes from the peer that owns it, in order.
                for nb in &part.recv {
                    for h in &part.halo_global[nb.offset..nb.offset + nb.count] {
                        assert_eq!(p.owner(*h), nb.peer);
                    }
                }
                assert_eq!(
                    part.nnz(),
                    (a.row_ptr()[rows.end as usize] - a.row_ptr()[rows.start as usize]) as usize
                );
            }
            // What q sends to r is what r receives from q, entry by entry (global indices).
            for (r, pr) in ps.iter().enumerate() {
                for nb in &pr.recv {
                    let q = &ps[nb.peer];
                    let s = q
                        .send
                        .iter()
                        .find(|s| s.peer == r)
                        .expect("matching send list");
                    let sent: Vec<u64> = q.send_idx[s.offset..s.offset + s.count]
                        .iter()
                        .map(|&l| q.local_to_global(l as usize))
                        .collect();
                    assert_eq!(sent, pr.halo_global[nb.offset..nb.offset + nb.count]);
                }
            }
        }
    }
}

#[test]
fn distributed_product_matches_the_global_one() {
    for a in [
        generate::random::<f64>(500, 7, 11).unwrap(),
        convection(17, 0.3),
    ] {
        let n = a.nrows();
        let x: Vec<f64> = (0..n).map(|i| ((i * 31) % 17) as f64 - 8.0).collect();
        let mut want = vec![0.0; n];
        segsparse::spmv::spmv(1.0, &a, &x, 0.0, &mut want);
        for k in [1, 2, 4] {
            let p = Partition::by_nnz(a.row_ptr(), k);
            let ys = sim::run(k, |comm| {
                let rows = p.rows(comm.rank());
                let op = sim::SimCsr::new(
                    &RowBlock::from_csr(&a, rows.clone()).unwrap(),
                    &p,
                    comm.clone(),
                )
                .unwrap();
                let xl = x[rows.start as usize..rows.end as usize].to_vec();
                let mut y = vec![f64::NAN; op.n_owned()];
                segsparse::backend::LinearOperator::apply(
                    &op,
                    &sim::SimOps::new(comm),
                    &xl,
                    &mut y,
                )
                .unwrap();
                y
            });
            let got: Vec<f64> = ys.concat();
            assert_eq!(got.len(), n);
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (g - w).abs() <= 1e-12 * (1.0 + w.abs()),
                    "row {i}, {k} ranks"
                );
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Method {
    Cg,
    Jacobi,
    Bicgstab,
}

/// Solves on `k` simulated ranks; returns (iterations of every rank, the assembled x, residual).
fn solve_sim(
    a: &CsrMatrix<f64>,
    b: &[f64],
    k: usize,
    m: Method,
    params: &SolveParams,
) -> (Vec<usize>, Vec<f64>, f64) {
    let p = Partition::by_nnz(a.row_ptr(), k);
    let out = sim::run(k, |comm| {
        let rows = p.rows(comm.rank());
        let op = sim::SimCsr::new(
            &RowBlock::from_csr(a, rows.clone()).unwrap(),
            &p,
            comm.clone(),
        )
        .unwrap();
        let be = sim::SimOps::new(comm);
        let bl = b[rows.start as usize..rows.end as usize].to_vec();
        let mut x = vec![0.0; op.n_owned()];
        let info = match m {
            Method::Cg => cg(&be, &op, &bl, &mut x, params),
            Method::Jacobi => {
                let jac = Jacobi::from_diagonal(&be, &op.part().owned.diagonal()).unwrap();
                pcg(&be, &op, &jac, &bl, &mut x, params)
            }
            Method::Bicgstab => bicgstab(&be, &op, &Identity, &bl, &mut x, params),
        }
        .unwrap();
        (info.iterations, x, info.relative_residual)
    });
    let iters = out.iter().map(|o| o.0).collect();
    let res = out[0].2;
    (iters, out.into_iter().flat_map(|o| o.1).collect(), res)
}

#[test]
fn distributed_solvers_match_the_single_process_solve() {
    let params = SolveParams {
        rel_tol: 1e-10,
        ..Default::default()
    };
    let spd = generate::poisson2d::<f64>(24).unwrap();
    let uns = convection(20, 0.35);
    for (a, m) in [
        (&spd, Method::Cg),
        (&spd, Method::Jacobi),
        (&uns, Method::Bicgstab),
    ] {
        let b = rhs(a.nrows());
        let mut x1 = vec![0.0; a.nrows()];
        let one = match m {
            Method::Cg => cg(&Cpu, a, &b, &mut x1, &params),
            Method::Jacobi => {
                let jac = Jacobi::from_diagonal(&Cpu, &a.diagonal()).unwrap();
                pcg(&Cpu, a, &jac, &b, &mut x1, &params)
            }
            Method::Bicgstab => bicgstab(&Cpu, a, &Identity, &b, &mut x1, &params),
        }
        .unwrap();
        for k in [1, 2, 3, 4] {
            let (iters, x, res) = solve_sim(a, &b, k, m, &params);
            assert!(
                iters.iter().all(|&i| i == iters[0]),
                "ranks disagree: {iters:?}"
            );
            assert!(
                iters[0].abs_diff(one.iterations) <= 1,
                "{k} ranks: {} vs {} iterations",
                iters[0],
                one.iterations
            );
            assert!(res <= 1e-10, "{k} ranks: residual {res}");
            let err = x
                .iter()
                .zip(&x1)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            let scale = x1.iter().map(|v| v.abs()).fold(0.0, f64::max);
            assert!(err <= 1e-7 * scale, "{k} ranks: |x - x1| = {err}");
        }
    }
}

#[test]
fn generated_blocks_solve_without_a_global_matrix() {
    let (nx, ny, nz) = (9u64, 8u64, 7u64);
    let n = nx * ny * nz;
    let p = Partition::by_rows(n, 3);
    let params = SolveParams {
        rel_tol: 1e-10,
        ..Default::default()
    };
    let out = sim::run(3, |comm| {
        let block = poisson3d_block::<f64>((nx, ny, nz), p.rows(comm.rank())).unwrap();
        let op = sim::SimCsr::new(&block, &p, comm.clone()).unwrap();
        let be = sim::SimOps::new(comm);
        let b = vec![1.0; op.n_owned()];
        let mut x = vec![0.0; op.n_owned()];
        let info = cg(&be, &op, &b, &mut x, &params).unwrap();
        (info.iterations, x)
    });
    // The same problem assembled globally.
    let mut t = Vec::new();
    let blk = poisson3d_block::<f64>((nx, ny, nz), 0..n).unwrap();
    for i in 0..n as usize {
        for k in blk.row_ptr[i] as usize..blk.row_ptr[i + 1] as usize {
            t.push((i, blk.cols[k] as usize, blk.vals[k]));
        }
    }
    let a = CsrMatrix::from_triplets(n as usize, n as usize, &t).unwrap();
    let mut x1 = vec![0.0; n as usize];
    let one = cg(&Cpu, &a, &vec![1.0; n as usize], &mut x1, &params).unwrap();
    assert!(out[0].0.abs_diff(one.iterations) <= 1);
    let x: Vec<f64> = out.into_iter().flat_map(|o| o.1).collect();
    for (a, b) in x.iter().zip(&x1) {
        assert!((a - b).abs() <= 1e-7 * b.abs().max(1.0));
    }
}

#[test]
fn bad_blocks_are_errors() {
    let a = generate::poisson2d::<f64>(5).unwrap();
    let p = Partition::by_rows(25, 2);
    // A block that does not match the partition.
    let wrong = RowBlock::from_csr(&a, 0..10).unwrap();
    let e = DistPart::build(&wrong, &p, 0, Ok).unwrap_err();
    assert!(e.to_string().contains("does not match"), "{e}");
    // A column outside the matrix.
    let mut bad = RowBlock::from_csr(&a, p.rows(0)).unwrap();
    bad.cols[0] = 99;
    assert!(DistPart::build(&bad, &p, 0, Ok).is_err());
    // A peer asking for an entry this rank does not own.
    let good = RowBlock::from_csr(&a, p.rows(0)).unwrap();
    let e = DistPart::build(&good, &p, 0, |_| Ok(vec![vec![], vec![20]])).unwrap_err();
    assert!(e.to_string().contains("does not own"), "{e}");
    // Non-square global matrix.
    let r = CsrMatrix::<f64>::from_triplets(2, 3, &[(0, 2, 1.0)]).unwrap();
    assert!(RowBlock::from_csr(&r, 0..1).is_err());
}

// --- issue 22: preconditioners across ranks, and the timing model on simulated ranks ----------

use segsparse::backend::Preconditioner;
use segsparse::dist::{
    solve_rank, BlockJacobi, DistAmg, DistAmgParams, DistPrecond, DistSolve, Krylov, LocalPrecond,
};
use segsparse::precond::{Amg, AmgParams, Ic0, Ilu0, IncompleteParams};
use segsparse::precond::{Chebyshev, ChebyshevParams};
use segsparse::solvers::SolveInfo;

fn ip() -> IncompleteParams {
    IncompleteParams {
        auto_shift: true,
        ..Default::default()
    }
}

/// Every local solver of block-Jacobi, with a name.
fn locals() -> Vec<LocalPrecond> {
    vec![
        LocalPrecond::Jacobi,
        LocalPrecond::Chebyshev(ChebyshevParams::default()),
        LocalPrecond::Ilu0(ip()),
        LocalPrecond::Ic0(ip()),
        LocalPrecond::Amg(AmgParams::default()),
    ]
}

/// The single-process preconditioner `l` of `a` on the CPU, applied to `r`.
fn apply_single(a: &CsrMatrix<f64>, l: &LocalPrecond, r: &[f64]) -> Vec<f64> {
    let r = r.to_vec();
    let mut z = vec![f64::NAN; r.len()];
    match l {
        LocalPrecond::Jacobi => Jacobi::from_matrix(&Cpu, a)
            .unwrap()
            .apply(&Cpu, &r, &mut z),
        LocalPrecond::Chebyshev(p) => Chebyshev::from_matrix(&Cpu, a, a, p)
            .unwrap()
            .apply(&Cpu, &r, &mut z),
        LocalPrecond::Ilu0(p) => Ilu0::new(&Cpu, a, p).unwrap().apply(&Cpu, &r, &mut z),
        LocalPrecond::Ic0(p) => Ic0::new(&Cpu, a, p).unwrap().apply(&Cpu, &r, &mut z),
        LocalPrecond::Amg(p) => Amg::new(&Cpu, a, p).unwrap().apply(&Cpu, &r, &mut z),
        _ => unreachable!(),
    }
    .unwrap();
    z
}

/// The one-process solve of `a x = b` with preconditioner `l` (CG for SPD, else BiCGSTAB).
fn solve_single(a: &CsrMatrix<f64>, b: &[f64], l: &LocalPrecond, method: Krylov) -> SolveInfo {
    fn go<P: Preconditioner<f64, Cpu>>(
        a: &CsrMatrix<f64>,
        p: &P,
        b: &[f64],
        method: Krylov,
    ) -> SolveInfo {
        let mut x = vec![0.0; a.nrows()];
        let b = b.to_vec();
        match method {
            Krylov::Cg => pcg(&Cpu, a, p, &b, &mut x, &params10()),
            Krylov::Bicgstab => bicgstab(&Cpu, a, p, &b, &mut x, &params10()),
        }
        .unwrap()
    }
    match l {
        LocalPrecond::Jacobi => go(a, &Jacobi::from_matrix(&Cpu, a).unwrap(), b, method),
        LocalPrecond::Chebyshev(p) => go(
            a,
            &Chebyshev::from_matrix(&Cpu, a, a, p).unwrap(),
            b,
            method,
        ),
        LocalPrecond::Ilu0(p) => go(a, &Ilu0::new(&Cpu, a, p).unwrap(), b, method),
        LocalPrecond::Ic0(p) => go(a, &Ic0::new(&Cpu, a, p).unwrap(), b, method),
        LocalPrecond::Amg(p) => go(a, &Amg::new(&Cpu, a, p).unwrap(), b, method),
        _ => unreachable!(),
    }
}

fn params10() -> SolveParams<'static> {
    SolveParams {
        rel_tol: 1e-10,
        ..Default::default()
    }
}

/// A distributed solve on `k` simulated ranks through `dist::solve_rank`: every rank's outcome
/// (iterations or the error, setup and solve seconds, the rank's wall time from before its part
/// was built) and the assembled x.
#[allow(clippy::type_complexity)]
fn solve_dist(
    a: &CsrMatrix<f64>,
    b: &[f64],
    k: usize,
    what: &DistSolve,
) -> (Vec<(Result<SolveInfo, String>, f64, f64, f64)>, Vec<f64>) {
    let p = Partition::by_nnz(a.row_ptr(), k);
    let out = sim::run(k, |comm| {
        let wall = std::time::Instant::now();
        let rows = p.rows(comm.rank());
        let op = sim::SimCsr::new(
            &RowBlock::from_csr(a, rows.clone()).unwrap(),
            &p,
            comm.clone(),
        )
        .unwrap();
        let be = sim::SimOps::new(comm);
        let prior = wall.elapsed().as_secs_f64();
        let (r0, r1) = (rows.start as usize, rows.end as usize);
        let mut x = vec![0.0; r1 - r0];
        let part = op.part();
        let o = solve_rank(
            &be,
            &op,
            &part.owned,
            part.first_row,
            &b[r0..r1],
            &mut x,
            what,
            prior,
        )
        .unwrap();
        let wall = wall.elapsed().as_secs_f64();
        (
            (
                o.result.map_err(|e| e.to_string()),
                o.setup_seconds,
                o.solve_seconds,
                wall,
            ),
            x,
        )
    });
    let (outs, xs): (Vec<_>, Vec<_>) = out.into_iter().unzip();
    (outs, xs.concat())
}

/// `‖b − A·x‖ / ‖b‖`.
fn relative_residual(a: &CsrMatrix<f64>, x: &[f64], b: &[f64]) -> f64 {
    let mut ax = vec![0.0; a.nrows()];
    segsparse::spmv::spmv(1.0, a, x, 0.0, &mut ax);
    let r = ax
        .iter()
        .zip(b)
        .map(|(p, q)| (p - q) * (p - q))
        .sum::<f64>();
    r.sqrt() / b.iter().map(|v| v * v).sum::<f64>().sqrt()
}

/// The whole of `a` on one simulated rank.
fn whole(a: &CsrMatrix<f64>, comm: sim::SimComm) -> sim::SimCsr<f64> {
    let n = a.nrows() as u64;
    sim::SimCsr::new(
        &RowBlock::from_csr(a, 0..n).unwrap(),
        &Partition::by_rows(n, 1),
        comm,
    )
    .unwrap()
}

fn iterations(outs: &[(Result<SolveInfo, String>, f64, f64, f64)]) -> usize {
    let it: Vec<usize> = outs
        .iter()
        .map(|o| o.0.as_ref().expect("converged").iterations)
        .collect();
    assert!(it.iter().all(|&i| i == it[0]), "ranks disagree: {it:?}");
    it[0]
}

#[test]
fn block_jacobi_on_one_rank_is_the_one_rank_preconditioner() {
    let a = generate::poisson3d::<f64>(10).unwrap();
    let n = a.nrows();
    let r: Vec<f64> = (0..n).map(|i| ((i * 37) % 23) as f64 / 7.0 - 1.5).collect();
    let b = rhs(n);
    for l in locals() {
        // The application, bit for bit: on one rank the diagonal block is the whole matrix.
        let want = apply_single(&a, &l, &r);
        let got = sim::run(1, |comm| {
            let op = whole(&a, comm.clone());
            let be = sim::SimOps::new(comm);
            let m = segsparse::dist::setup_precond(
                &be,
                &op,
                &op.part().owned,
                0,
                &DistPrecond::BlockJacobi(l),
            )
            .unwrap();
            let mut z = vec![f64::NAN; n];
            m.apply(&be, &r, &mut z).unwrap();
            z
        })
        .remove(0);
        assert_eq!(got, want, "block-Jacobi({}) on one rank", l.name());
        // The solve: the same iterations as the one-process solve with that preconditioner.
        let one = solve_single(&a, &b, &l, Krylov::Cg);
        let what = DistSolve {
            method: Krylov::Cg,
            precond: DistPrecond::BlockJacobi(l),
            params: params10(),
        };
        let (outs, _) = solve_dist(&a, &b, 1, &what);
        let it = iterations(&outs);
        assert!(
            it.abs_diff(one.iterations) <= 1,
            "block-Jacobi({}) on one rank: {it} iterations, one process {}",
            l.name(),
            one.iterations
        );
    }
    // BlockJacobi forwards a diagonal, so Jacobi stays fused into the vector steps.
    let jac = Jacobi::from_matrix(&Cpu, &a).unwrap();
    let bj = BlockJacobi::new(jac);
    let d = <BlockJacobi<_> as Preconditioner<f64, sim::SimOps>>::inverse_diagonal(&bj);
    assert!(d.is_some());
}

/// Block-Jacobi drops the couplings between ranks, so it needs more iterations than the
/// one-device preconditioner; how many more depends on how much of the spectrum the local
/// solver fixes. Measured here (Poisson 3D 16³, CG to 1e-10; `GRID=24` or `32` in the
/// environment runs a larger grid and `TABLE=1` prints instead of asserting):
///
/// | local solver | one device | 2 ranks | 3 ranks | 4 ranks |
/// |---|---:|---:|---:|---:|
/// | Jacobi | 63 | 63 | 63 | 63 |
/// | ILU(0) / IC(0) | 24 | 31 | 35 | 35 |
/// | Chebyshev, degree 5 | 16 | 23 | 29 | 31 |
/// | AMG | 8 | 23 | 28 | 28 |
///
/// (24³: ILU 33 → 45/47/47, AMG 9 → 28/32/34; 32³: ILU 43 → 54/62/58, AMG 10 → 32/38/40.)
/// The ~1.3× of the issue holds for Jacobi (exactly 1: it is diagonal) and for ILU(0)/IC(0) on
/// two ranks; three and four ranks (thin slabs: 4–5 z-planes here) cost up to 1.45×; a local
/// polynomial up to 2×; AMG loses its global coarse correction at the cuts (3–4×, still fewer
/// iterations than block-Jacobi ILU). The asserted bounds are those, with a little room.
#[test]
fn block_jacobi_on_2_to_4_ranks_against_the_one_device_iterations() {
    let g: usize = std::env::var("GRID")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16);
    let a = generate::poisson3d::<f64>(g).unwrap();
    let b = rhs(a.nrows());
    let table = std::env::var("TABLE").is_ok();
    let mut bj_ilu = Vec::new();
    let mut bj_amg = Vec::new();
    for l in locals() {
        let one = solve_single(&a, &b, &l, Krylov::Cg).iterations;
        let what = DistSolve {
            method: Krylov::Cg,
            precond: DistPrecond::BlockJacobi(l),
            params: params10(),
        };
        for k in [2, 3, 4] {
            let (outs, x) = solve_dist(&a, &b, k, &what);
            let it = iterations(&outs);
            println!("{} k={k}: {it} (one device {one})", l.name());
            // The assembled solution solves the global system.
            let res = relative_residual(&a, &x, &b);
            assert!(res <= 1e-10, "{} on {k} ranks: residual {res}", l.name());
            if table {
                continue;
            }
            let ratio = it as f64 / one as f64;
            let bound = match (l, k) {
                (LocalPrecond::Jacobi, _) => 1.0,
                (LocalPrecond::Ilu0(_) | LocalPrecond::Ic0(_), 2) => 1.3,
                (LocalPrecond::Ilu0(_) | LocalPrecond::Ic0(_), _) => 1.5,
                (LocalPrecond::Chebyshev(_), _) => 2.0,
                (LocalPrecond::Amg(_), _) => 4.0,
                _ => unreachable!(),
            };
            assert!(
                ratio <= bound,
                "block-Jacobi({}) on {k} ranks: {it} iterations, one device {one} ({ratio:.2}× > \
                 {bound}×)",
                l.name()
            );
            match l {
                LocalPrecond::Ilu0(_) => bj_ilu.push(it),
                LocalPrecond::Amg(_) => bj_amg.push(it),
                _ => {}
            }
        }
    }
    // Block-Jacobi AMG stays the strongest of them.
    for (amg, ilu) in bj_amg.iter().zip(&bj_ilu) {
        assert!(amg < ilu, "block-Jacobi AMG {amg} vs ILU {ilu}");
    }
}

#[test]
fn block_jacobi_bicgstab_on_an_unsymmetric_matrix() {
    let a = convection(40, 0.3);
    let b = rhs(a.nrows());
    for l in [LocalPrecond::Jacobi, LocalPrecond::Ilu0(ip())] {
        let one = solve_single(&a, &b, &l, Krylov::Bicgstab).iterations;
        let what = DistSolve {
            method: Krylov::Bicgstab,
            precond: DistPrecond::BlockJacobi(l),
            params: params10(),
        };
        for k in [1, 2, 4] {
            let (outs, _) = solve_dist(&a, &b, k, &what);
            let it = iterations(&outs);
            println!(
                "bicgstab block-Jacobi({}) k={k}: {it} (one device {one})",
                l.name()
            );
            assert!(
                it as f64 <= 1.3 * one as f64 + 1.0,
                "{} on {k} ranks: {it} vs {one}",
                l.name()
            );
        }
    }
}

#[test]
fn the_distributed_polynomial_is_the_one_process_polynomial() {
    let a = generate::poisson3d::<f64>(14).unwrap();
    let b = rhs(a.nrows());
    for degree in [3, 5] {
        let cp = ChebyshevParams {
            degree,
            ..Default::default()
        };
        // One process, the same estimate (VectorOps-only Arnoldi, partition-independent start).
        let inv = Jacobi::from_matrix(&Cpu, &a)
            .unwrap()
            .into_inverse_diagonal();
        let poly = Chebyshev::from_operator(&Cpu, &a, Some(inv), 0, &cp).unwrap();
        // ... and the GMRES-kernel estimate of the one-device path: nearly the same interval.
        let krylov = Chebyshev::from_matrix(&Cpu, &a, &a, &cp).unwrap();
        let (i1, i2) = (poly.interval(), krylov.interval());
        assert!(
            (i1.1 - i2.1).abs() <= 1e-2 * i2.1,
            "upper ends {i1:?} vs {i2:?}"
        );
        let mut x = vec![0.0; a.nrows()];
        let one = pcg(&Cpu, &a, &poly, &b, &mut x, &params10())
            .unwrap()
            .iterations;
        let what = DistSolve {
            method: Krylov::Cg,
            precond: DistPrecond::Chebyshev(cp),
            params: params10(),
        };
        for k in [1, 2, 3, 4] {
            let (outs, _) = solve_dist(&a, &b, k, &what);
            let it = iterations(&outs);
            assert!(
                it.abs_diff(one) <= 1,
                "degree {degree} on {k} ranks: {it} iterations, one process {one}"
            );
        }
    }
}

#[test]
fn every_timing_field_is_present_and_consistent_on_simulated_ranks() {
    let a = generate::poisson3d::<f64>(12).unwrap();
    let b = rhs(a.nrows());
    for (precond, max_iters) in [
        (DistPrecond::None, 10_000),
        (DistPrecond::BlockJacobi(LocalPrecond::Ic0(ip())), 10_000),
        (DistPrecond::Chebyshev(ChebyshevParams::default()), 10_000),
        // Not converged: the solve is still timed.
        (DistPrecond::Jacobi, 3),
    ] {
        let what = DistSolve {
            method: Krylov::Cg,
            precond,
            params: SolveParams {
                max_iters,
                ..params10()
            },
        };
        let (outs, _) = solve_dist(&a, &b, 3, &what);
        for (r, setup, solve, wall) in &outs {
            assert!(*setup > 0.0 && *solve > 0.0, "{setup} {solve}");
            assert!(setup + solve <= *wall, "{setup} + {solve} > {wall}");
            match r {
                Ok(info) => {
                    assert_eq!(info.setup_seconds, *setup);
                    // The solver's own clock runs inside the timed call.
                    assert!(info.solve_seconds > 0.0 && info.solve_seconds <= *solve);
                    assert_eq!(
                        info.seconds_per_iteration(),
                        info.solve_seconds / info.iterations as f64
                    );
                }
                Err(e) => {
                    assert_eq!(max_iters, 3, "{e}");
                    assert!(e.contains("not converged"), "{e}");
                }
            }
        }
    }
}

#[test]
fn a_setup_that_fails_on_one_rank_fails_on_every_rank_without_hanging() {
    // A zero on the diagonal of the last rank's rows only: Jacobi, block-Jacobi IC(0) (without
    // the automatic shift) and the polynomial's diagonal fail there; the other ranks must not
    // wait forever in the next collective.
    let n = 200;
    let mut t = Vec::new();
    for i in 0..n {
        t.push((i, i, if i == n - 3 { 0.0 } else { 4.0 }));
        if i > 0 {
            t.push((i, i - 1, -1.0));
            t.push((i - 1, i, -1.0));
        }
    }
    let a = CsrMatrix::<f64>::from_triplets(n, n, &t).unwrap();
    let b = rhs(n);
    for precond in [
        DistPrecond::Jacobi,
        DistPrecond::BlockJacobi(LocalPrecond::Ic0(IncompleteParams::default())),
        DistPrecond::Chebyshev(ChebyshevParams::default()),
        DistPrecond::Amg(DistAmgParams {
            gather_rows: 0,
            ..Default::default()
        }),
    ] {
        let p = Partition::by_rows(n as u64, 3);
        let errs = sim::run(3, |comm| {
            let rows = p.rows(comm.rank());
            let op = sim::SimCsr::new(
                &RowBlock::from_csr(&a, rows.clone()).unwrap(),
                &p,
                comm.clone(),
            )
            .unwrap();
            let be = sim::SimOps::new(comm);
            let what = DistSolve {
                method: Krylov::Cg,
                precond,
                params: params10(),
            };
            let mut x = vec![0.0; op.n_owned()];
            let part = op.part();
            let (r0, r1) = (rows.start as usize, rows.end as usize);
            solve_rank(
                &be,
                &op,
                &part.owned,
                part.first_row,
                &b[r0..r1],
                &mut x,
                &what,
                0.0,
            )
            .map(|_| ())
            .unwrap_err()
            .to_string()
        });
        assert!(
            errs[0].contains("failed on 1 other rank"),
            "{}: {errs:?}",
            precond.name()
        );
        assert!(
            errs[1].contains("failed on 1 other rank"),
            "{}: {errs:?}",
            precond.name()
        );
        assert!(
            !errs[2].contains("other rank"),
            "{}: {errs:?}",
            precond.name()
        );
    }
}

fn dist_amg(gather_rows: usize) -> DistAmgParams {
    DistAmgParams {
        gather_rows,
        ..Default::default()
    }
}

/// On one rank the distributed AMG's aggregation, prolongators, Galerkin products and smoothers
/// are the single-device ones on the same data: the same level sizes, the same coarse
/// operators, the same application (to rounding) and the same PCG iterations, whether the
/// coarse levels are distributed (`gather_rows` 0: every level down to the coarse size) or the
/// whole hierarchy is gathered to rank 0.
#[test]
fn distributed_amg_on_one_rank_is_the_one_device_hierarchy() {
    let cases = [
        (generate::poisson3d::<f64>(16).unwrap(), 0),
        (generate::poisson3d::<f64>(24).unwrap(), 0),
        (generate::aniso2d::<f64>(64, 0.01).unwrap(), 0),
        (generate::poisson3d::<f64>(16).unwrap(), 100_000),
    ];
    for (a, gather) in cases {
        let n = a.nrows();
        let single = Amg::new(&Cpu, &a, &AmgParams::default()).unwrap();
        let want_rows: Vec<u64> = single
            .summary()
            .levels
            .iter()
            .map(|l| l.rows as u64)
            .collect();
        let mats = single.level_matrices(&Cpu).unwrap();
        let r: Vec<f64> = (0..n).map(|i| ((i * 37) % 23) as f64 / 7.0 - 1.5).collect();
        let mut want = vec![0.0; n];
        single.apply(&Cpu, &r, &mut want).unwrap();
        // The cost one application reports: the one-device hierarchy's, forwarded by
        // block-Jacobi and computed from the distributed summary by the distributed AMG.
        let want_cost = single.cost_in_products();
        let bj = BlockJacobi::new(Amg::new(&Cpu, &a, &AmgParams::default()).unwrap());
        let bj_cost = <BlockJacobi<_> as Preconditioner<f64, sim::SimOps>>::cost_in_products(&bj);
        assert_eq!(bj_cost, want_cost);
        let (rows, distributed, coarse, got, cost) = sim::run(1, |comm| {
            let op = whole(&a, comm.clone());
            let be = sim::SimOps::new(comm);
            let m = DistAmg::new(&be, &op, op.part(), None, &dist_amg(gather)).unwrap();
            let mut z = vec![f64::NAN; n];
            m.apply(&be, &r, &mut z).unwrap();
            let s = m.summary();
            (
                s.rows.clone(),
                s.distributed_levels,
                m.coarse_rows().to_vec(),
                z,
                m.cost_in_products(),
            )
        })
        .remove(0);
        assert_eq!(rows, want_rows, "level sizes ({n} rows, gather {gather})");
        assert!(
            (cost - want_cost).abs() <= 1e-12 * want_cost && cost > 2.0,
            "cost {cost} vs {want_cost}"
        );
        if gather == 0 {
            assert!(
                distributed >= 1 && distributed < rows.len(),
                "{distributed}"
            );
        } else {
            assert_eq!(distributed, 0);
        }
        assert_eq!(coarse.len(), distributed);
        for (j, blk) in coarse.iter().enumerate() {
            let m = &mats[j + 1];
            let want = RowBlock::from_csr(m, 0..m.nrows() as u64).unwrap();
            assert_eq!((&blk.row_ptr, &blk.cols), (&want.row_ptr, &want.cols));
            let scale = want.vals.iter().fold(0.0f64, |s, v| s.max(v.abs()));
            for (x, y) in blk.vals.iter().zip(&want.vals) {
                assert!(
                    (x - y).abs() <= 1e-13 * scale,
                    "level {}: {x} vs {y}",
                    j + 1
                );
            }
        }
        let scale = want.iter().fold(0.0f64, |s, v| s.max(v.abs()));
        for (i, (x, y)) in got.iter().zip(&want).enumerate() {
            assert!((x - y).abs() <= 1e-12 * scale, "row {i}: {x} vs {y}");
        }
        let b = rhs(n);
        let one = solve_single(&a, &b, &LocalPrecond::Amg(AmgParams::default()), Krylov::Cg);
        let what = DistSolve {
            method: Krylov::Cg,
            precond: DistPrecond::Amg(dist_amg(gather)),
            params: params10(),
        };
        let (outs, _) = solve_dist(&a, &b, 1, &what);
        assert_eq!(iterations(&outs), one.iterations, "PCG iterations");
    }
}

/// With the couplings between ranks kept (aggregates per rank, distributed prolongators and
/// Galerkin products), the iterations stay within 1.2× of one device's on 2 and 4 ranks, where
/// block-Jacobi AMG needs 1.5× to 3× as many. `TABLE=1` prints instead of asserting.
#[test]
fn distributed_amg_keeps_the_one_device_iterations_on_2_and_4_ranks() {
    let table = std::env::var("TABLE").is_ok();
    let cases = [
        ("poisson3d 20³", generate::poisson3d::<f64>(20).unwrap()),
        (
            "aniso2d 80² ε=0.01",
            generate::aniso2d::<f64>(80, 0.01).unwrap(),
        ),
    ];
    for (name, a) in &cases {
        let b = rhs(a.nrows());
        let one =
            solve_single(a, &b, &LocalPrecond::Amg(AmgParams::default()), Krylov::Cg).iterations;
        for k in [2, 4] {
            let mut its = Vec::new();
            for precond in [
                DistPrecond::Amg(dist_amg(0)),
                DistPrecond::BlockJacobi(LocalPrecond::Amg(AmgParams::default())),
            ] {
                let what = DistSolve {
                    method: Krylov::Cg,
                    precond,
                    params: params10(),
                };
                let (outs, x) = solve_dist(a, &b, k, &what);
                let res = relative_residual(a, &x, &b);
                assert!(
                    res <= 1e-10,
                    "{name}, {} on {k} ranks: residual {res}",
                    precond.name()
                );
                its.push(iterations(&outs));
            }
            let (dist, bj) = (its[0], its[1]);
            println!("{name}, {k} ranks: distributed AMG {dist}, block-Jacobi AMG {bj}, one device {one}");
            if table {
                continue;
            }
            assert!(
                dist as f64 <= 1.2 * one as f64,
                "{name} on {k} ranks: {dist} iterations, one device {one}"
            );
            assert!(
                3 * dist <= 2 * bj,
                "{name} on {k} ranks: distributed AMG {dist} vs block-Jacobi AMG {bj}"
            );
        }
    }
}
