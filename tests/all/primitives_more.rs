//! The primitives built on scan (issue 7): CPU references checked against independent
//! definitions, and every GPU primitive checked against its CPU reference on fresh random data,
//! sizes at and around tile boundaries, duplicates, all-equal keys, sorted and reverse-sorted
//! input, empty segments, floats with -0.0 and NaN. Integers compare exactly; float reductions
//! with a tolerance scaled by the segment length.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use segsparse::primitives::compact::{cpu as ccpu, Keep};
use segsparse::primitives::sort::cpu as scpu;
use segsparse::primitives::{distribute, enumerate, segreduce, split, Direction, ScanOp};

fn rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

fn bools(r: &mut ChaCha8Rng, n: usize, p: f64) -> Vec<bool> {
    (0..n).map(|_| r.gen_bool(p)).collect()
}

/// Offsets of `m` segments over random lengths in `0..=max_len` (empty ones included).
fn offsets(r: &mut ChaCha8Rng, m: usize, max_len: u32) -> Vec<u32> {
    let mut o = vec![0u32];
    for _ in 0..m {
        let l = if r.gen_bool(0.2) {
            0
        } else {
            r.gen_range(0..=max_len)
        };
        o.push(o.last().unwrap() + l);
    }
    o
}

fn heads_of(offsets: &[u32], n: usize) -> Vec<bool> {
    let mut h = vec![false; n];
    for &o in offsets {
        if (o as usize) < n {
            h[o as usize] = true;
        }
    }
    h
}

/// Inputs that stress sorts: random, few distinct values, all equal, sorted, reverse.
fn key_sets(r: &mut ChaCha8Rng, n: usize) -> Vec<(&'static str, Vec<u32>)> {
    let rand: Vec<u32> = (0..n).map(|_| r.gen()).collect();
    let dups: Vec<u32> = (0..n).map(|_| r.gen_range(0..7)).collect();
    let mut sorted = rand.clone();
    sorted.sort();
    let mut rev = sorted.clone();
    rev.reverse();
    vec![
        ("random", rand),
        ("duplicates", dups),
        ("all-equal", vec![42; n]),
        ("sorted", sorted),
        ("reverse", rev),
    ]
}

fn special_floats(r: &mut ChaCha8Rng, n: usize) -> Vec<f32> {
    let specials = [
        0.0f32,
        -0.0,
        f32::NAN,
        -f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MIN_POSITIVE,
        -1.0,
        1.0,
    ];
    (0..n)
        .map(|_| {
            if r.gen_bool(0.2) {
                specials[r.gen_range(0..specials.len())]
            } else {
                r.gen_range(-1e3f32..1e3)
            }
        })
        .collect()
}

// ------------------------------------------------------------------------------------------
// CPU references against independent definitions.

#[test]
fn cpu_enumerate_counts_trues_before_and_after() {
    let mut r = rng(1);
    for n in [0, 1, 7, 100] {
        let f = bools(&mut r, n, 0.5);
        let fwd = enumerate::cpu::enumerate(&f, Direction::Forward);
        let bwd = enumerate::cpu::enumerate(&f, Direction::Backward);
        for i in 0..n {
            assert_eq!(fwd[i] as usize, f[..i].iter().filter(|&&x| x).count());
            assert_eq!(bwd[i] as usize, f[i + 1..].iter().filter(|&&x| x).count());
        }
        let h = bools(&mut r, n, 0.2);
        let sf = enumerate::cpu::segmented_enumerate(&f, &h, Direction::Forward);
        let sb = enumerate::cpu::segmented_enumerate(&f, &h, Direction::Backward);
        for i in 0..n {
            let start = (0..=i).rev().find(|&j| j == 0 || h[j]).unwrap();
            let end = (i + 1..n).find(|&j| h[j]).unwrap_or(n);
            assert_eq!(sf[i] as usize, f[start..i].iter().filter(|&&x| x).count());
            assert_eq!(sb[i] as usize, f[i + 1..end].iter().filter(|&&x| x).count());
        }
    }
}

#[test]
fn cpu_distribute_copies_segment_ends() {
    let mut r = rng(2);
    let n = 200;
    let v: Vec<u32> = (0..n).map(|_| r.gen()).collect();
    let h = bools(&mut r, n, 0.1);
    let f = distribute::cpu::segmented_distribute(&v, &h, Direction::Forward);
    let b = distribute::cpu::segmented_distribute(&v, &h, Direction::Backward);
    for i in 0..n {
        let start = (0..=i).rev().find(|&j| j == 0 || h[j]).unwrap();
        let end = (i + 1..n).find(|&j| h[j]).unwrap_or(n);
        assert_eq!(f[i], v[start]);
        assert_eq!(b[i], v[end - 1]);
    }
    assert_eq!(
        distribute::cpu::distribute(&v, Direction::Backward),
        vec![v[n - 1]; n]
    );
    assert!(distribute::cpu::distribute::<u32>(&[], Direction::Forward).is_empty());
}

#[test]
fn cpu_split_matches_the_papers_addresses_and_is_stable() {
    let mut r = rng(3);
    for n in [0, 1, 2, 33, 500] {
        let f = bools(&mut r, n, 0.5);
        let v: Vec<u32> = (0..n as u32).collect();
        let (out, nf) = split::cpu::split(&v, &f);
        let addr = split::cpu::split_addresses(&f);
        let mut scattered = vec![0u32; n];
        for i in 0..n {
            scattered[addr[i] as usize] = v[i];
        }
        assert_eq!(out, scattered);
        assert_eq!(nf, f.iter().filter(|&&x| !x).count());
        // stable: indices increase within each half
        assert!(out[..nf].windows(2).all(|w| w[0] < w[1]));
        assert!(out[nf..].windows(2).all(|w| w[0] < w[1]));
        assert!(out[..nf].iter().all(|&i| !f[i as usize]));
    }
}

#[test]
fn cpu_split_and_segment_splits_each_segment() {
    let mut r = rng(4);
    let o = offsets(&mut r, 40, 9);
    let n = *o.last().unwrap() as usize;
    let h = heads_of(&o, n);
    let f = bools(&mut r, n, 0.4);
    let v: Vec<u32> = (0..n as u32).collect();
    let (out, nh) = split::cpu::split_and_segment(&v, &f, &h);
    let mut expect_heads = vec![false; n];
    for w in o.windows(2) {
        let (a, b) = (w[0] as usize, w[1] as usize);
        if a == b {
            continue;
        }
        let (part, nf) = split::cpu::split(&v[a..b], &f[a..b]);
        assert_eq!(&out[a..b], &part[..]);
        expect_heads[a] = true;
        if nf > 0 && nf < b - a {
            expect_heads[a + nf] = true;
        }
    }
    assert_eq!(nh, expect_heads);
}

#[test]
fn cpu_compact_and_predicates() {
    let mut r = rng(5);
    let v = special_floats(&mut r, 300);
    for keep in [
        Keep::Greater(0.0f32),
        Keep::GreaterEq(-0.0),
        Keep::Less(1.0),
        Keep::LessEq(0.0),
        Keep::Equal(0.0),
        Keep::NotEqual(0.0),
    ] {
        let flags: Vec<bool> = v.iter().map(|&x| keep.test(x)).collect();
        let a = ccpu::compact_if(&v, keep);
        let b = ccpu::compact(&v, &flags);
        assert_eq!(a.len(), b.len());
        assert!(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()));
    }
    // NaN is kept only by NotEqual.
    assert_eq!(ccpu::compact_if(&[f32::NAN], Keep::Greater(0.0)).len(), 0);
    assert_eq!(ccpu::compact_if(&[f32::NAN], Keep::NotEqual(0.0)).len(), 1);
    let (k, vv) = ccpu::compact_pairs(&[1u32, 2, 3], &[10u64, 20, 30], &[false, true, true]);
    assert_eq!((k, vv), (vec![2, 3], vec![20, 30]));
}

#[test]
fn cpu_segmented_reduce_offsets_and_heads_agree() {
    let mut r = rng(6);
    let o = offsets(&mut r, 60, 12);
    let n = *o.last().unwrap() as usize;
    let v: Vec<i32> = (0..n).map(|_| r.gen_range(-100..100)).collect();
    for op in [ScanOp::Plus, ScanOp::Max, ScanOp::Min] {
        let by_off = segreduce::cpu::segmented_reduce_offsets(&v, &o, op);
        for (s, w) in o.windows(2).enumerate() {
            let seg = &v[w[0] as usize..w[1] as usize];
            let want = match op {
                ScanOp::Plus => seg.iter().sum(),
                ScanOp::Max => seg.iter().copied().max().unwrap_or(i32::MIN),
                ScanOp::Min => seg.iter().copied().min().unwrap_or(i32::MAX),
            };
            assert_eq!(by_off[s], want, "segment {s} op {op:?}");
        }
        let h = heads_of(&o, n);
        let by_heads = segreduce::cpu::segmented_reduce_heads(&v, &h, op);
        let nonempty: Vec<i32> = o
            .windows(2)
            .zip(&by_off)
            .filter(|(w, _)| w[0] < w[1])
            .map(|(_, &x)| x)
            .collect();
        assert_eq!(by_heads, nonempty);
    }
}

#[test]
fn cpu_sorts_agree_with_std() {
    let mut r = rng(7);
    for (name, keys) in key_sets(&mut r, 300) {
        let mut want = keys.clone();
        want.sort();
        assert_eq!(scpu::radix_sort(&keys), want, "{name}");
        assert_eq!(scpu::split_radix_sort(&keys), want, "{name}");
        let (q, passes) = scpu::quicksort(&keys);
        assert_eq!(q, want, "{name} quicksort after {passes} passes");
    }
    let f = special_floats(&mut r, 500);
    let mut want = f.clone();
    want.sort_by(f32::total_cmp);
    let got = scpu::radix_sort(&f);
    assert!(got
        .iter()
        .zip(&want)
        .all(|(a, b)| a.to_bits() == b.to_bits()));
    let i: Vec<i32> = (0..300).map(|_| r.gen()).collect();
    let mut wi = i.clone();
    wi.sort();
    assert_eq!(scpu::radix_sort(&i), wi);
    assert_eq!(scpu::split_radix_sort(&i), wi);
    // stability of pairs: equal keys keep the order of their values
    let k: Vec<u32> = (0..400).map(|_| r.gen_range(0..5)).collect();
    let v: Vec<u32> = (0..400).collect();
    let (sk, sv) = scpu::radix_sort_pairs(&k, &v);
    for w in sk.windows(2).zip(sv.windows(2)) {
        assert!(w.0[0] < w.0[1] || (w.0[0] == w.0[1] && w.1[0] < w.1[1]));
    }
}

#[test]
fn cpu_segmented_sort_sorts_each_segment() {
    let mut r = rng(8);
    let o = offsets(&mut r, 50, 20);
    let n = *o.last().unwrap() as usize;
    let k: Vec<u32> = (0..n).map(|_| r.gen_range(0..10)).collect();
    let v: Vec<u32> = (0..n as u32).collect();
    let (sk, sv) = scpu::segmented_sort_pairs(&k, &v, &o);
    assert_eq!(sk, scpu::segmented_sort(&k, &o));
    for w in o.windows(2) {
        let (a, b) = (w[0] as usize, w[1] as usize);
        let mut want = k[a..b].to_vec();
        want.sort();
        assert_eq!(&sk[a..b], &want[..]);
        for j in a..b {
            assert_eq!(k[sv[j] as usize], sk[j]);
            assert!((a..b).contains(&(sv[j] as usize)));
        }
    }
}

// ------------------------------------------------------------------------------------------
// GPU against the CPU reference.

#[cfg(feature = "cuda")]
mod gpu {
    use super::*;
    use segsparse::gpu::{test_gpu, Gpu};
    use segsparse::primitives::gpu::HeadFlags;
    use segsparse::primitives::{compact, pack_flags, sort, unpack_flags};

    /// Sizes at and around the 4096-element tiles, and a multi-tile ragged one.
    const SIZES: &[usize] = &[
        1, 2, 31, 32, 33, 4095, 4096, 4097, 8191, 8192, 12289, 100_003,
    ];
    /// The sort's sizes: both sides of the Onesweep tiles (by default 7168 keys alone, 5120
    /// key-value pairs, 3584 for 8-byte keys or values) and of their multiples, the tiles of
    /// other shapes (7680, 3840), and enough tiles for long look-back chains.
    const SORT_SIZES: &[usize] = &[
        1, 2, 31, 33, 3583, 3584, 3585, 3840, 4097, 5119, 5120, 5121, 7167, 7168, 7169, 7681,
        10241, 14337, 15361, 100_003, 1_000_003,
    ];

    fn up<T: segsparse::gpu::KernelType>(g: &Gpu, v: &[T]) -> segsparse::gpu::DeviceBuffer<T> {
        g.upload(v).unwrap()
    }

    #[test]
    fn gpu_compact_flags_values_and_pairs() {
        let Some(g) = test_gpu() else { return };
        let mut r = rng(100);
        for &n in SIZES.iter().chain(&[0usize]) {
            for p in [0.0, 0.6, 1.0] {
                let v: Vec<u32> = (0..n).map(|_| r.gen()).collect();
                let w: Vec<u64> = (0..n).map(|_| r.gen()).collect();
                let f = bools(&mut r, n, p);
                let fw = up(
                    &g,
                    &pack_flags(&f).into_iter().chain([0]).collect::<Vec<_>>(),
                );
                let (out, c) = compact::gpu::compact(&g, &up(&g, &v), &fw).unwrap();
                let want = ccpu::compact(&v, &f);
                assert_eq!(c, want.len(), "n={n} p={p}");
                assert_eq!(&g.download(&out).unwrap()[..c], &want[..], "n={n} p={p}");
                let (ko, vo, c2) =
                    compact::gpu::compact_pairs(&g, &up(&g, &v), &up(&g, &w), &fw).unwrap();
                let (wk, wv) = ccpu::compact_pairs(&v, &w, &f);
                assert_eq!(c2, wk.len());
                assert_eq!(&g.download(&ko).unwrap()[..c2], &wk[..]);
                assert_eq!(&g.download(&vo).unwrap()[..c2], &wv[..]);
            }
        }
    }

    #[test]
    fn gpu_compact_if_floats_and_ints() {
        let Some(g) = test_gpu() else { return };
        let mut r = rng(101);
        for &n in SIZES {
            let v = special_floats(&mut r, n);
            let dv = up(&g, &v);
            for keep in [
                Keep::Greater(0.0f32),
                Keep::GreaterEq(-0.0),
                Keep::Less(1.0),
                Keep::LessEq(0.0),
                Keep::Equal(0.0),
                Keep::NotEqual(0.0),
            ] {
                let (out, c) = compact::gpu::compact_if(&g, &dv, keep).unwrap();
                let want = ccpu::compact_if(&v, keep);
                let got = &g.download(&out).unwrap()[..c];
                assert_eq!(c, want.len(), "n={n} {keep:?}");
                assert!(got
                    .iter()
                    .zip(&want)
                    .all(|(a, b)| a.to_bits() == b.to_bits()));
            }
            let vi: Vec<i32> = (0..n).map(|_| r.gen_range(-50..50)).collect();
            let vals: Vec<u32> = (0..n as u32).collect();
            let (ko, vo, c) =
                compact::gpu::compact_pairs_if(&g, &up(&g, &vi), &up(&g, &vals), Keep::Less(10))
                    .unwrap();
            let (wk, wv) = ccpu::compact_pairs_if(&vi, &vals, Keep::Less(10));
            assert_eq!(c, wk.len());
            assert_eq!(&g.download(&ko).unwrap()[..c], &wk[..]);
            assert_eq!(&g.download(&vo).unwrap()[..c], &wv[..]);
        }
    }

    #[test]
    fn gpu_split_and_pairs() {
        let Some(g) = test_gpu() else { return };
        let mut r = rng(102);
        for &n in SIZES {
            for p in [0.0, 0.3, 1.0] {
                let v: Vec<u64> = (0..n).map(|_| r.gen()).collect();
                let vals: Vec<f32> = (0..n).map(|i| i as f32).collect();
                let f = bools(&mut r, n, p);
                let fw = up(&g, &pack_flags(&f));
                let (out, nf) = split::gpu::split(&g, &up(&g, &v), &fw).unwrap();
                let (want, wnf) = split::cpu::split(&v, &f);
                assert_eq!(nf, wnf, "n={n}");
                assert_eq!(g.download(&out).unwrap(), want, "n={n} p={p}");
                let (ko, vo, nf2) =
                    split::gpu::split_pairs(&g, &up(&g, &v), &up(&g, &vals), &fw).unwrap();
                let (wk, wv, _) = split::cpu::split_pairs(&v, &vals, &f);
                assert_eq!(nf2, wnf);
                assert_eq!(g.download(&ko).unwrap(), wk);
                assert_eq!(g.download(&vo).unwrap(), wv);
            }
        }
    }

    #[test]
    fn gpu_enumerate_and_distribute() {
        let Some(g) = test_gpu() else { return };
        let mut r = rng(103);
        for &n in SIZES {
            let f = bools(&mut r, n, 0.5);
            let h = bools(&mut r, n, 0.05);
            let fw = up(&g, &pack_flags(&f));
            let hf = HeadFlags::from_flags(&g, &h).unwrap();
            for dir in [Direction::Forward, Direction::Backward] {
                let e = enumerate::gpu::enumerate(&g, &fw, n, dir).unwrap();
                assert_eq!(g.download(&e).unwrap(), enumerate::cpu::enumerate(&f, dir));
                let se = enumerate::gpu::segmented_enumerate(&g, &fw, &hf, n, dir).unwrap();
                assert_eq!(
                    g.download(&se).unwrap(),
                    enumerate::cpu::segmented_enumerate(&f, &h, dir),
                    "n={n} {dir:?}"
                );
                let v32 = special_floats(&mut r, n);
                let d = distribute::gpu::segmented_distribute(&g, &up(&g, &v32), &hf, dir).unwrap();
                let want = distribute::cpu::segmented_distribute(&v32, &h, dir);
                let got = g.download(&d).unwrap();
                assert!(
                    got.iter()
                        .zip(&want)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "n={n}"
                );
                let v64: Vec<u64> = (0..n).map(|_| r.gen()).collect();
                let d = distribute::gpu::segmented_distribute(&g, &up(&g, &v64), &hf, dir).unwrap();
                assert_eq!(
                    g.download(&d).unwrap(),
                    distribute::cpu::segmented_distribute(&v64, &h, dir)
                );
                let d = distribute::gpu::distribute(&g, &up(&g, &v64), dir).unwrap();
                assert_eq!(
                    g.download(&d).unwrap(),
                    distribute::cpu::distribute(&v64, dir)
                );
            }
        }
    }

    #[test]
    fn gpu_split_and_segment() {
        let Some(g) = test_gpu() else { return };
        let mut r = rng(104);
        for max_len in [3u32, 40, 5000] {
            let o = offsets(&mut r, 60, max_len);
            let n = *o.last().unwrap() as usize;
            if n == 0 {
                continue;
            }
            let h = heads_of(&o, n);
            let f = bools(&mut r, n, 0.5);
            let v: Vec<u32> = (0..n).map(|_| r.gen()).collect();
            let hf = HeadFlags::from_flags(&g, &h).unwrap();
            let (out, nh) =
                split::gpu::split_and_segment(&g, &up(&g, &v), &up(&g, &pack_flags(&f)), &hf)
                    .unwrap();
            let (want, wh) = split::cpu::split_and_segment(&v, &f, &h);
            assert_eq!(g.download(&out).unwrap(), want, "max_len={max_len}");
            assert_eq!(nh.to_host(&g).unwrap(), wh);
        }
    }

    fn check_segreduce<T>(g: &Gpu, v: &[T], o: &[u32], tol: impl Fn(T, T, usize) -> bool)
    where
        T: segsparse::primitives::ScanElem + segsparse::gpu::KernelType,
    {
        for op in [ScanOp::Plus, ScanOp::Max, ScanOp::Min] {
            let got =
                segreduce::gpu::segmented_reduce_offsets(g, &up(g, v), &up(g, o), op).unwrap();
            let got = g.download(&got).unwrap();
            let want = segreduce::cpu::segmented_reduce_offsets(v, o, op);
            for s in 0..want.len() {
                let len = (o[s + 1] - o[s]) as usize;
                assert!(
                    tol(got[s], want[s], len),
                    "segment {s} (len {len}) {op:?}: {:?} vs {:?}",
                    got[s],
                    want[s]
                );
            }
        }
    }

    #[test]
    fn gpu_segmented_reduce_every_length() {
        let Some(g) = test_gpu() else { return };
        let mut r = rng(105);
        for (m, max_len) in [
            (1usize, 0u32),
            (3, 0),
            (5000, 3),
            (3000, 40),
            // averages of ~60 and ~125: the 8- and 16-lane group kernels (segreduce::gpu::tile_body)
            (2000, 120),
            (1000, 250),
            (4000, 1),
            (3000, 1),
            (200, 5000),
            (3, 70_000),
            (1, 100_003),
        ] {
            let mut o = offsets(&mut r, m, max_len);
            if m == 1 && max_len > 0 {
                o = vec![0, max_len];
            }
            // Mostly short segments with a few long ones (averages ~20 and ~32): the 4- and
            // 8-lane group kernels hand the long ones to the whole block.
            if max_len == 1 {
                let cycle: &[u32] = if m == 4000 {
                    &[1, 2, 5, 70, 0, 7, 3, 4, 11, 100]
                } else {
                    &[1, 2, 5, 90, 0, 7, 3, 4, 11, 200]
                };
                o = std::iter::once(0)
                    .chain(cycle.iter().cycle().take(m).scan(0u32, |acc, &l| {
                        *acc += l;
                        Some(*acc)
                    }))
                    .collect();
            }
            let n = *o.last().unwrap() as usize;
            let vi: Vec<i32> = (0..n).map(|_| r.gen_range(-1000..1000)).collect();
            check_segreduce(&g, &vi, &o, |a, b, _| a == b);
            let vu: Vec<u32> = (0..n).map(|_| r.gen_range(0..1000)).collect();
            check_segreduce(&g, &vu, &o, |a, b, _| a == b);
            let vf: Vec<f32> = (0..n).map(|_| r.gen_range(-1.0..1.0)).collect();
            check_segreduce(&g, &vf, &o, |a, b, len| {
                (a - b).abs() <= 1e-5 * (len as f32 + 1.0) * 4.0 || a == b
            });
            let vd: Vec<f64> = (0..n).map(|_| r.gen_range(-1.0..1.0)).collect();
            check_segreduce(&g, &vd, &o, |a, b, len| {
                (a - b).abs() <= 1e-13 * (len as f64 + 1.0) || a == b
            });
            // From head flags: one result per non-empty segment.
            let h = heads_of(&o, n);
            let hf = HeadFlags::from_flags(&g, &h).unwrap();
            let (out, cnt) =
                segreduce::gpu::segmented_reduce_heads(&g, &up(&g, &vi), &hf, ScanOp::Plus)
                    .unwrap();
            let want = segreduce::cpu::segmented_reduce_heads(&vi, &h, ScanOp::Plus);
            assert_eq!(cnt, want.len());
            assert_eq!(&g.download(&out).unwrap()[..cnt], &want[..]);
        }
    }

    /// Segments of fixed lengths, all starting 16-byte aligned (32, 64: the group kernels'
    /// vector loads with no unaligned head or tail; with 32, no segment crosses a tile and the
    /// fix-up has nothing to do) or not (33, 67); and one segment over more than 128 tiles (the
    /// fix-up warp's four loads in flight per lane).
    #[test]
    fn gpu_segmented_reduce_vector_loads_and_fixup() {
        let Some(g) = test_gpu() else { return };
        let mut r = rng(115);
        let fixed = |m: usize, len: u32| -> Vec<u32> { (0..=m as u32).map(|s| s * len).collect() };
        for o in [
            fixed(40_000, 32),
            fixed(20_000, 64),
            fixed(30_000, 33),
            fixed(9_000, 67),
            fixed(3_000, 260),
            vec![0, 600_001],
            vec![0, 7, 600_011, 600_020],
        ] {
            let n = *o.last().unwrap() as usize;
            let vi: Vec<i32> = (0..n).map(|_| r.gen_range(-1000..1000)).collect();
            check_segreduce(&g, &vi, &o, |a, b, _| a == b);
            let vu: Vec<u32> = (0..n).map(|_| r.gen_range(0..1000)).collect();
            check_segreduce(&g, &vu, &o, |a, b, _| a == b);
            let vf: Vec<f32> = (0..n).map(|_| r.gen_range(-1.0..1.0)).collect();
            check_segreduce(&g, &vf, &o, |a, b, len| {
                (a - b).abs() <= 1e-5 * (len as f32 + 1.0) * 4.0 || a == b
            });
            let vd: Vec<f64> = (0..n).map(|_| r.gen_range(-1.0..1.0)).collect();
            check_segreduce(&g, &vd, &o, |a, b, len| {
                (a - b).abs() <= 1e-13 * (len as f64 + 1.0) || a == b
            });
        }
    }

    #[test]
    fn gpu_radix_sort_keys_all_types() {
        let Some(g) = test_gpu() else { return };
        let mut r = rng(106);
        for &n in SORT_SIZES {
            for (name, keys) in key_sets(&mut r, n) {
                let mut d = up(&g, &keys);
                sort::gpu::radix_sort(&g, &mut d).unwrap();
                assert_eq!(
                    g.download(&d).unwrap(),
                    scpu::radix_sort(&keys),
                    "u32 {name} n={n}"
                );
            }
            let ki: Vec<i32> = (0..n).map(|_| r.gen()).collect();
            let mut d = up(&g, &ki);
            sort::gpu::radix_sort(&g, &mut d).unwrap();
            assert_eq!(g.download(&d).unwrap(), scpu::radix_sort(&ki), "i32 n={n}");
            let kf = special_floats(&mut r, n);
            let mut d = up(&g, &kf);
            sort::gpu::radix_sort(&g, &mut d).unwrap();
            let got = g.download(&d).unwrap();
            let want = scpu::radix_sort(&kf);
            assert!(
                got.iter()
                    .zip(&want)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "f32 n={n}"
            );
            let k64: Vec<u64> = (0..n)
                .map(|_| r.gen::<u64>() >> r.gen_range(0..64))
                .collect();
            let mut d = up(&g, &k64);
            sort::gpu::radix_sort(&g, &mut d).unwrap();
            assert_eq!(g.download(&d).unwrap(), scpu::radix_sort(&k64), "u64 n={n}");
        }
    }

    #[test]
    fn gpu_radix_sort_pairs_is_stable() {
        let Some(g) = test_gpu() else { return };
        let mut r = rng(107);
        for &n in SORT_SIZES {
            let k: Vec<u32> = (0..n).map(|_| r.gen_range(0..13)).collect();
            let v: Vec<u32> = (0..n as u32).collect();
            let (mut dk, mut dv) = (up(&g, &k), up(&g, &v));
            sort::gpu::radix_sort_pairs(&g, &mut dk, &mut dv).unwrap();
            let (wk, wv) = scpu::radix_sort_pairs(&k, &v);
            assert_eq!(g.download(&dk).unwrap(), wk);
            assert_eq!(g.download(&dv).unwrap(), wv, "n={n}");
            let kf = special_floats(&mut r, n);
            let v64: Vec<u64> = (0..n as u64).collect();
            let (mut dk, mut dv) = (up(&g, &kf), up(&g, &v64));
            sort::gpu::radix_sort_pairs(&g, &mut dk, &mut dv).unwrap();
            let (_, wv) = scpu::radix_sort_pairs(&kf, &v64);
            assert_eq!(g.download(&dv).unwrap(), wv, "f32/u64 n={n}");
        }
    }

    #[test]
    fn gpu_segmented_sort() {
        let Some(g) = test_gpu() else { return };
        let mut r = rng(108);
        for (m, max_len) in [(1usize, 5000u32), (400, 30), (40, 3000), (5000, 2)] {
            let o = offsets(&mut r, m, max_len);
            let n = *o.last().unwrap() as usize;
            let k: Vec<u32> = (0..n).map(|_| r.gen_range(0..100)).collect();
            let v: Vec<u32> = (0..n as u32).collect();
            let dof = up(&g, &o);
            let mut dk = up(
                &g,
                &k.iter()
                    .copied()
                    .chain([0])
                    .take(n.max(1))
                    .collect::<Vec<_>>(),
            );
            if n == 0 {
                continue;
            }
            sort::gpu::segmented_sort(&g, &mut dk, &dof).unwrap();
            assert_eq!(
                g.download(&dk).unwrap(),
                scpu::segmented_sort(&k, &o),
                "m={m}"
            );
            let (mut dk, mut dv) = (up(&g, &k), up(&g, &v));
            sort::gpu::segmented_sort_pairs(&g, &mut dk, &mut dv, &dof).unwrap();
            let (wk, wv) = scpu::segmented_sort_pairs(&k, &v, &o);
            assert_eq!(g.download(&dk).unwrap(), wk);
            assert_eq!(g.download(&dv).unwrap(), wv);
        }
    }

    #[test]
    fn gpu_quicksort_as_in_the_paper() {
        let Some(g) = test_gpu() else { return };
        let mut r = rng(109);
        for n in [1usize, 5, 33, 4097, 20_000] {
            for (name, keys) in key_sets(&mut r, n) {
                if name == "reverse" && n > 4097 {
                    continue; // two passes per element with the first-element pivot
                }
                let mut d = up(&g, &keys);
                let passes = sort::gpu::quicksort(&g, &mut d).unwrap();
                let (want, cpu_passes) = scpu::quicksort(&keys);
                assert_eq!(g.download(&d).unwrap(), want, "{name} n={n}");
                assert_eq!(
                    passes, cpu_passes,
                    "{name} n={n}: same passes as the CPU reference"
                );
            }
        }
        let kf = special_floats(&mut r, 3000);
        let mut d = up(&g, &kf);
        sort::gpu::quicksort(&g, &mut d).unwrap();
        let got = g.download(&d).unwrap();
        assert!(got
            .iter()
            .zip(&scpu::radix_sort(&kf))
            .all(|(a, b)| a.to_bits() == b.to_bits()));
        let _ = unpack_flags(&[1], 1);
    }

    /// One small call of every shared-memory kernel (two tiles and a ragged one), for
    /// compute-sanitizer's memcheck and racecheck, which are too slow for the full tests.
    #[test]
    fn gpu_sanitizer_small() {
        let Some(g) = test_gpu() else { return };
        let mut r = rng(111);
        let n = 2 * 4096 + 77;
        let k: Vec<u32> = (0..n).map(|_| r.gen_range(0..300)).collect();
        let v: Vec<u32> = (0..n as u32).collect();
        let (mut dk, mut dv) = (up(&g, &k), up(&g, &v));
        sort::gpu::radix_sort_pairs(&g, &mut dk, &mut dv).unwrap();
        assert_eq!(g.download(&dk).unwrap(), scpu::radix_sort(&k));
        let mut dk = up(&g, &k);
        sort::gpu::radix_sort(&g, &mut dk).unwrap();
        assert_eq!(g.download(&dk).unwrap(), scpu::radix_sort(&k));
        let k64: Vec<u64> = (0..n).map(|_| r.gen::<u64>() >> 20).collect();
        let mut dk = up(&g, &k64);
        sort::gpu::radix_sort(&g, &mut dk).unwrap();
        assert_eq!(g.download(&dk).unwrap(), scpu::radix_sort(&k64));
        let f = bools(&mut r, n, 0.6);
        let fw = up(&g, &pack_flags(&f));
        let (out, c) = compact::gpu::compact(&g, &up(&g, &k), &fw).unwrap();
        assert_eq!(&g.download(&out).unwrap()[..c], &ccpu::compact(&k, &f)[..]);
        let (out, _) = split::gpu::split(&g, &up(&g, &k), &fw).unwrap();
        assert_eq!(g.download(&out).unwrap(), split::cpu::split(&k, &f).0);
        let o = offsets(&mut r, 300, 60);
        let m = *o.last().unwrap() as usize;
        let vi: Vec<i32> = (0..m).map(|_| r.gen_range(-9..9)).collect();
        let got =
            segreduce::gpu::segmented_reduce_offsets(&g, &up(&g, &vi), &up(&g, &o), ScanOp::Plus)
                .unwrap();
        assert_eq!(
            g.download(&got).unwrap(),
            segreduce::cpu::segmented_reduce_offsets(&vi, &o, ScanOp::Plus)
        );
    }

    /// Key-value pairs of every key type, with few distinct keys (long runs of equal keys
    /// across tiles: stability across the look-back) and with random keys.
    #[test]
    fn gpu_radix_sort_pairs_every_key_type() {
        let Some(g) = test_gpu() else { return };
        let mut r = rng(112);
        for n in [7681usize, 100_003] {
            let idx: Vec<u32> = (0..n as u32).collect();
            for distinct in [3u32, u32::MAX] {
                let ki: Vec<i32> = (0..n)
                    .map(|_| r.gen_range(0..=distinct) as i32 - 1)
                    .collect();
                let (mut dk, mut dv) = (up(&g, &ki), up(&g, &idx));
                sort::gpu::radix_sort_pairs(&g, &mut dk, &mut dv).unwrap();
                let (wk, wv) = scpu::radix_sort_pairs(&ki, &idx);
                assert_eq!(g.download(&dk).unwrap(), wk, "i32 n={n}");
                assert_eq!(g.download(&dv).unwrap(), wv, "i32 n={n}");
                let k64: Vec<u64> = (0..n)
                    .map(|_| (r.gen_range(0..=distinct) as u64) << 40 | 7)
                    .collect();
                let (mut dk, mut dv) = (up(&g, &k64), up(&g, &idx));
                sort::gpu::radix_sort_pairs(&g, &mut dk, &mut dv).unwrap();
                let (wk, wv) = scpu::radix_sort_pairs(&k64, &idx);
                assert_eq!(g.download(&dk).unwrap(), wk, "u64 n={n}");
                assert_eq!(g.download(&dv).unwrap(), wv, "u64 n={n}");
                let v64: Vec<u64> = (0..n as u64).map(|i| i * 3 + 1).collect();
                let ku: Vec<u32> = (0..n).map(|_| r.gen_range(0..=distinct)).collect();
                let (mut dk, mut dv) = (up(&g, &ku), up(&g, &v64));
                sort::gpu::radix_sort_pairs(&g, &mut dk, &mut dv).unwrap();
                let (wk, wv) = scpu::radix_sort_pairs(&ku, &v64);
                assert_eq!(g.download(&dk).unwrap(), wk, "u32/u64 n={n}");
                assert_eq!(g.download(&dv).unwrap(), wv, "u32/u64 n={n}");
            }
        }
    }

    /// 2^28 keys (the largest size): key-value pairs with the index as value, checked
    /// in O(n) without a CPU sort: keys ascending, values a permutation of 0..n, every key the
    /// input key at its value's index, and equal keys in index order (stable). Then keys only
    /// (f32), checked ascending in totalOrder and equal to the input as a multiset
    /// (order-independent sums of the bits and of a mix of them).
    #[test]
    fn gpu_radix_sort_2_pow_28() {
        let Some(g) = test_gpu() else { return };
        let n = 1usize << 28;
        let mut r = rng(113);
        let k: Vec<u32> = (0..n).map(|_| r.gen()).collect();
        let idx: Vec<u32> = (0..n as u32).collect();
        let (mut dk, mut dv) = (up(&g, &k), up(&g, &idx));
        drop(idx);
        sort::gpu::radix_sort_pairs(&g, &mut dk, &mut dv).unwrap();
        let (sk, sv) = (g.download(&dk).unwrap(), g.download(&dv).unwrap());
        drop((dk, dv));
        let mut seen = vec![false; n];
        for j in 0..n {
            let i = sv[j] as usize;
            assert!(!seen[i], "value {i} twice");
            seen[i] = true;
            assert_eq!(sk[j], k[i], "key at {j} is not the input key of its value");
            if j > 0 {
                assert!(
                    sk[j - 1] < sk[j] || (sk[j - 1] == sk[j] && sv[j - 1] < sv[j]),
                    "order or stability broken at {j}"
                );
            }
        }
        drop((sk, sv, seen, k));
        let f: Vec<f32> = (0..n)
            .map(|i| {
                if i % 1000 == 0 {
                    -0.0
                } else {
                    r.gen_range(-1e9f32..1e9)
                }
            })
            .collect();
        let fingerprint = |v: &[f32]| {
            v.iter().fold((0u64, 0u64), |(a, b), x| {
                let u = x.to_bits() as u64;
                (
                    a.wrapping_add(u),
                    b.wrapping_add(u.wrapping_mul(u) ^ (u << 29)),
                )
            })
        };
        let want = fingerprint(&f);
        let mut df = up(&g, &f);
        drop(f);
        sort::gpu::radix_sort(&g, &mut df).unwrap();
        let got = g.download(&df).unwrap();
        assert!(got.windows(2).all(|w| w[0].total_cmp(&w[1]).is_le()));
        assert_eq!(fingerprint(&got), want);
    }

    #[test]
    fn gpu_large_sizes() {
        let Some(g) = test_gpu() else { return };
        let mut r = rng(110);
        let n = (1 << 26) + 3;
        let k: Vec<u32> = (0..n).map(|_| r.gen()).collect();
        let mut d = up(&g, &k);
        sort::gpu::radix_sort(&g, &mut d).unwrap();
        let mut want = k.clone();
        want.sort_unstable();
        assert_eq!(g.download(&d).unwrap(), want);
        let f = bools(&mut r, n, 0.6);
        let (out, c) = compact::gpu::compact(&g, &up(&g, &k), &up(&g, &pack_flags(&f))).unwrap();
        let want = ccpu::compact(&k, &f);
        assert_eq!(c, want.len());
        assert_eq!(&g.download(&out).unwrap()[..c], &want[..]);
    }
}
