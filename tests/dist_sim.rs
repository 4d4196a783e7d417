//! The distributed decomposition and solvers on simulated ranks (CPU threads, no GPU or NCCL):
//! partitions, halo lists, index maps, the distributed product and CG/PCG/BiCGSTAB against the
//! single-process solve.

use segsparse::dist::{poisson3d_block, sim, DistPart, Partition, RowBlock};
use segsparse::solvers::{bicgstab, cg, pcg, Cpu, Identity, Jacobi, SolveParams};
use segsparse::{generate, CsrMatrix};

mod dist_common;
use dist_common::convection;

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
                segsparse::solvers::LinearOperator::apply(
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
