/*
 * llmc/cuda/matmul_problem.h: one cuBLASLt matmul as data (LtMatmul) and its constructor lt_problem,
 * shared by llmc/cuda/matmul.cu, which maps the model's row-major products onto column-major problems
 * and runs them with cuBLASLt, and test/host_cuda/kernels_host.cpp, which runs the same problems
 * with a CPU loop (column-major, cuBLASLt's epilogue semantics), so that the mapping itself (the
 * transposes and leading dimensions of matmul.cu) is exercised by the CPU tests.
 */
#ifndef LLMC_MATMUL_PROBLEM_H
#define LLMC_MATMUL_PROBLEM_H

#include <string.h>

#include "cuda_common.cuh"

typedef struct {
    bool trans_a, trans_b;
    uint64_t m, n, k;      /* D is m x n */
    const floatX *A;       /* op(A) is m x k */
    int64_t lda;
    const floatX *B;       /* op(B) is k x n */
    int64_t ldb;
    floatX *D;             /* also C when accumulate */
    int64_t ldd;
    bool accumulate;       /* beta = 1 */
    cublasLtEpilogue_t epilogue;
    const floatX *bias;    /* for *_BIAS epilogues */
    const floatX *aux;     /* GELU_AUX output / DGELU input */
    int64_t ld_aux;
} LtMatmul;

/* D = op(A) op(B) with no epilogue; the callers add bias, aux and accumulation. */
static inline LtMatmul lt_problem(bool trans_a, bool trans_b, uint64_t m, uint64_t n, uint64_t k, const floatX *A,
                           int64_t lda, const floatX *B, int64_t ldb, floatX *D, int64_t ldd) {
    LtMatmul mm;
    memset(&mm, 0, sizeof(mm));
    mm.trans_a = trans_a;
    mm.trans_b = trans_b;
    mm.m = m;
    mm.n = n;
    mm.k = k;
    mm.A = A;
    mm.lda = lda;
    mm.B = B;
    mm.ldb = ldb;
    mm.D = D;
    mm.ldd = ldd;
    mm.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    return mm;
}

/* Runs one problem: cuBLASLt in llmc/cuda/matmul.cu, a CPU loop in test/host_cuda/kernels_host.cpp. */
void lt_matmul(const LtMatmul *mm, const GpuCtx *ctx);

#endif /* LLMC_MATMUL_PROBLEM_H */
