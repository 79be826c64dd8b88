/*
 * llmc/cuda/lt_algo.h: the keys of the cuBLASLt algorithm cache (llmc/cuda/matmul.cu keeps the
 * algorithms), in plain C so that the lookup is unit-tested on the CPU (test/test_cuda_host.c).
 *
 * Defines: LtAlgoKey, LtAlgoTable, lt_algo_find, lt_algo_insert
 */
#ifndef LLMC_LT_ALGO_H
#define LLMC_LT_ALGO_H

#include <stdint.h>
#include <string.h>

/* ----------------------------------------------------------------------------------------------
 * cuBLASLt algorithm cache. cublasLtMatmulAlgoGetHeuristic costs host time on every call, and a
 * training step repeats a few dozen distinct matmul problems, so llmc/cuda/matmul.cu asks once per
 * problem and keeps the answer (the algorithm, in an array parallel to these keys). A key holds
 * every input of the heuristic except the operand pointers, whose alignments it holds instead:
 * the heuristic sees the pointers only through the alignment preferences (A, B, C = D), and the
 * bias and aux alignments are kept too, so a cached algorithm never meets an operand less aligned
 * than the one it was chosen for. The table is small and fixed; when it is full a new problem
 * is simply not cached (the heuristic then runs on each of its calls, as without the cache). */
#define LT_ALGO_SLOTS 256

typedef struct { /* int64_t fields only: no padding, so memcmp compares two keys */
    int64_t m, n, k, lda, ldb, ldd, ld_aux; /* D is m x n; op(A) m x k */
    int64_t trans_a, trans_b, epilogue, has_bias, has_aux;
    int64_t dtype, compute_type; /* cudaDataType_t of every operand, cublasComputeType_t */
    int64_t align_a, align_b, align_d, align_bias, align_aux; /* bytes, powers of two <= 256 */
    int64_t workspace;           /* bytes the algorithm may use */
} LtAlgoKey;

typedef struct {
    int count;
    LtAlgoKey key[LT_ALGO_SLOTS];
} LtAlgoTable;

/* The slot holding k, or -1. */
static inline int lt_algo_find(const LtAlgoTable *t, const LtAlgoKey *k) {
    for (int i = 0; i < t->count; i++)
        if (memcmp(&t->key[i], k, sizeof(*k)) == 0) return i;
    return -1;
}

/* A new slot for k (not in the table), or -1 when the table is full. */
static inline int lt_algo_insert(LtAlgoTable *t, const LtAlgoKey *k) {
    if (t->count == LT_ALGO_SLOTS) return -1;
    t->key[t->count] = *k;
    return t->count++;
}

#endif /* LLMC_LT_ALGO_H */
