// The (operator, type) pairs every scan entry point is instantiated for, and the policy
// defaults (Rust passes the real values from primitives::policy as -D defines; the defaults let
// CI compile every source with none).
#pragma once
#include "common.cuh"

#ifndef SCAN_THREADS
#define SCAN_THREADS 256
#endif
#ifndef SCAN_ITEMS_4
#define SCAN_ITEMS_4 16
#endif
#ifndef SCAN_ITEMS_8
#define SCAN_ITEMS_8 8
#endif
#ifndef SCAN_MIN_BLOCKS
#define SCAN_MIN_BLOCKS 8
#endif
#ifndef SPINE_THREADS
#define SPINE_THREADS 512
#endif
#ifndef SPINE_ITEMS
#define SPINE_ITEMS 8
#endif
#ifndef WE_THREADS
#define WE_THREADS 128
#endif

// M(op name, op struct, C type, suffix, items per thread)
#define SCAN_FOR_EACH_TYPE(M, OPN, OP)              \
    M(OPN, OP, float, f32, SCAN_ITEMS_4)            \
    M(OPN, OP, double, f64, SCAN_ITEMS_8)           \
    M(OPN, OP, int, i32, SCAN_ITEMS_4)              \
    M(OPN, OP, unsigned int, u32, SCAN_ITEMS_4)
#define SCAN_FOR_EACH_OP_TYPE(M)                    \
    SCAN_FOR_EACH_TYPE(M, plus, OpPlus)             \
    SCAN_FOR_EACH_TYPE(M, max, OpMax)               \
    SCAN_FOR_EACH_TYPE(M, min, OpMin)
