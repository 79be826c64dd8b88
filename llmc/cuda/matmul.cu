/*
 * llmc/cuda/matmul.cu: cuBLASLt matmuls with fused epilogues, and the GPU context (stream + handles).
 *
 * cuBLAS is column-major: a row-major (R, K) matrix is a column-major (K, R) one with ld K. So
 *   forward  out^T (OC x N) = W (IC x OC)^T . x^T (IC x N)        [op(A) = T, op(B) = N]
 *   dinp     dinp^T (IC x N) = W (IC x OC) . dout^T (OC x N)      [N, N]
 *   dW       dW^T (IC x OC) += x^T (IC x N) . (dout^T (OC x N))^T [N, T], beta = 1
 * The heuristic assumes 256-byte aligned pointers unless told otherwise, so the true alignment of
 * each operand (pointer and leading dimension) is passed as a preference: the per-layer buffers
 * of odd head sizes are then still served, by the algorithms that allow them. The heuristic's
 * choice is cached per problem in the context (llmc/cuda/lt_algo.h LtAlgoKey says what a problem is).
 */
#include "../utils.h"
#include "kernels.cuh"
#include "lt_algo.h"
#include "matmul.cuh"
#include "matmul_problem.h"

#define LT_WORKSPACE_BYTES (32u << 20)

/* LLMC_HOST_CUDA (test/host_cuda): the GPU context and lt_matmul come from the CPU backend; only
 * the mapping below (matmul_forward, matmul_backward) is compiled. */
#ifndef LLMC_HOST_CUDA

void gpu_ctx_init(GpuCtx *ctx, int device) {
    memset(ctx, 0, sizeof(*ctx));
    ctx->device = device;
    CUDA_CHECK(cudaSetDevice(device));
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    ctx->sm = prop.major * 10 + prop.minor;
    ctx->sm_count = prop.multiProcessorCount;
    ctx->total_mem = prop.totalGlobalMem;
    ctx->smem_optin = prop.sharedMemPerBlockOptin;
    snprintf(ctx->name, sizeof(ctx->name), "%s", prop.name);
    CUDA_CHECK(cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking));
    CUBLAS_CHECK(cublasCreate(&ctx->blas));
    CUBLAS_CHECK(cublasSetStream(ctx->blas, ctx->stream));
    /* tensor-op math in fp32 accumulation; no TF32 involved (all operands are bf16) */
    CUBLAS_CHECK(cublasSetMathMode(ctx->blas, CUBLAS_DEFAULT_MATH));
    CUBLAS_CHECK(cublasLtCreate(&ctx->lt));
    ctx->lt_workspace_size = LT_WORKSPACE_BYTES;
    CUDA_CHECK(cudaMalloc(&ctx->lt_workspace, ctx->lt_workspace_size));
    /* cuBLAS keeps its own workspace per stream; give it one so that no allocation happens
     * inside a step (and results stay reproducible, per the cuBLAS reproducibility notes) */
    CUBLAS_CHECK(cublasSetWorkspace(ctx->blas, ctx->lt_workspace, ctx->lt_workspace_size));
}

void gpu_allow_smem(const void *kernel, size_t bytes, size_t *memo) {
    if (bytes <= *memo) return;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    *memo = bytes;
}

void gpu_ctx_free(GpuCtx *ctx) {
    free(ctx->lt_algos);
    if (ctx->lt_workspace) CUDA_CHECK(cudaFree(ctx->lt_workspace));
    if (ctx->lt) cublasLtDestroy(ctx->lt);
    if (ctx->blas) cublasDestroy(ctx->blas);
    if (ctx->stream) CUDA_CHECK(cudaStreamDestroy(ctx->stream));
    memset(ctx, 0, sizeof(*ctx));
}

/* Largest power of two <= 256 dividing the byte address of every column start. */
static uint32_t operand_alignment(const void *p, int64_t ld) {
    uint64_t a = (uint64_t)(uintptr_t)p | (uint64_t)(ld * (int64_t)sizeof(floatX)) | 256u;
    return (uint32_t)(a & (~a + 1)); /* lowest set bit */
}

/* The algorithms of the problems seen so far, slot by slot with the keys (llmc/cuda/lt_algo.h). */
struct LtAlgoCache {
    LtAlgoTable table;
    cublasLtMatmulAlgo_t algo[LT_ALGO_SLOTS];
    int warned_full; /* the table-full warning is printed once */
};

static LtAlgoKey lt_key(const LtMatmul *mm, size_t workspace) {
    LtAlgoKey k;
    memset(&k, 0, sizeof(k));
    k.m = (int64_t)mm->m;
    k.n = (int64_t)mm->n;
    k.k = (int64_t)mm->k;
    k.lda = mm->lda;
    k.ldb = mm->ldb;
    k.ldd = mm->ldd;
    k.ld_aux = mm->ld_aux;
    k.trans_a = mm->trans_a;
    k.trans_b = mm->trans_b;
    k.epilogue = (int64_t)mm->epilogue;
    k.has_bias = mm->bias != NULL;
    k.has_aux = mm->aux != NULL;
    k.dtype = (int64_t)CUDA_R_16BF;
    k.compute_type = (int64_t)CUBLAS_COMPUTE_32F;
    k.align_a = operand_alignment(mm->A, mm->lda);
    k.align_b = operand_alignment(mm->B, mm->ldb);
    k.align_d = operand_alignment(mm->D, mm->ldd);
    k.align_bias = mm->bias != NULL ? operand_alignment(mm->bias, 0) : 0;
    k.align_aux = mm->aux != NULL ? operand_alignment(mm->aux, mm->ld_aux) : 0;
    k.workspace = (int64_t)workspace;
    return k;
}

/* cuBLASLt's first choice for this problem, with the operands' true alignments; no algorithm is
 * a one-line error. */
static cublasLtMatmulAlgo_t lt_heuristic(const LtMatmul *mm, const LtAlgoKey *key, cublasLtMatmulDesc_t desc,
                                         cublasLtMatrixLayout_t la, cublasLtMatrixLayout_t lb,
                                         cublasLtMatrixLayout_t ld, const GpuCtx *ctx) {
    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const size_t ws = ctx->lt_workspace_size;
    const uint32_t al_a = (uint32_t)key->align_a, al_b = (uint32_t)key->align_b, al_d = (uint32_t)key->align_d;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof(al_a)));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof(al_b)));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_d, sizeof(al_d)));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_d, sizeof(al_d)));
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(ctx->lt, desc, la, lb, ld, ld, pref, 1, &heur, &found));
    cublasLtMatmulPreferenceDestroy(pref);
    if (found == 0) {
        fflush(stdout);
        fprintf(stderr, "error: cuBLASLt: no algorithm for m %llu n %llu k %llu (trans %d%d, ld %lld "
                "%lld %lld, epilogue %d, alignment %u %u %u)\n", (unsigned long long)mm->m,
                (unsigned long long)mm->n, (unsigned long long)mm->k, mm->trans_a, mm->trans_b,
                (long long)mm->lda, (long long)mm->ldb, (long long)mm->ldd, (int)mm->epilogue, al_a,
                al_b, al_d);
        exit(EXIT_FAILURE);
    }
    return heur.algo;
}

/* The cached algorithm of this problem, asking the heuristic on its first call. */
static cublasLtMatmulAlgo_t lt_algo(const LtMatmul *mm, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t la,
                                    cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t ld, const GpuCtx *ctx) {
    if (ctx->lt_algos == NULL) ctx->lt_algos = (LtAlgoCache *)xcalloc(1, sizeof(LtAlgoCache));
    LtAlgoCache *c = ctx->lt_algos;
    const LtAlgoKey key = lt_key(mm, ctx->lt_workspace_size);
    int slot = lt_algo_find(&c->table, &key);
    if (slot >= 0) return c->algo[slot];
    const cublasLtMatmulAlgo_t algo = lt_heuristic(mm, &key, desc, la, lb, ld, ctx);
    slot = lt_algo_insert(&c->table, &key);
    if (slot >= 0) {
        c->algo[slot] = algo;
    } else if (!c->warned_full) {
        c->warned_full = 1;
        fprintf(stderr, "warning: cuBLASLt algorithm cache full (%d problems): new matmul shapes now run "
                "the heuristic on every call (raise LT_ALGO_SLOTS in llmc/cuda/lt_algo.h)\n", LT_ALGO_SLOTS);
    }
    return algo;
}

void lt_matmul(const LtMatmul *mm, const GpuCtx *ctx) {
    cublasLtMatmulDesc_t desc;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = mm->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = mm->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &mm->epilogue,
                                                sizeof(mm->epilogue)));
    if (mm->bias != NULL) {
        const cudaDataType_t bt = CUDA_R_16BF;
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt)));
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &mm->bias,
                                                    sizeof(mm->bias)));
    }
    if (mm->aux != NULL) {
        const cudaDataType_t at = CUDA_R_16BF;
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &at, sizeof(at)));
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                                    &mm->aux, sizeof(mm->aux)));
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
                                                    &mm->ld_aux, sizeof(mm->ld_aux)));
    }
    /* stored shapes: A is (rows x cols) = op(A) before transposition */
    cublasLtMatrixLayout_t la, lb, ld;
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, mm->trans_a ? mm->k : mm->m,
                                            mm->trans_a ? mm->m : mm->k, mm->lda));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, mm->trans_b ? mm->n : mm->k,
                                            mm->trans_b ? mm->k : mm->n, mm->ldb));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, mm->m, mm->n, mm->ldd));

    const cublasLtMatmulAlgo_t algo = lt_algo(mm, desc, la, lb, ld, ctx);
    const float alpha = 1.0f, beta = mm->accumulate ? 1.0f : 0.0f;
    CUBLAS_CHECK(cublasLtMatmul(ctx->lt, desc, &alpha, mm->A, la, mm->B, lb, &beta, mm->D, ld, mm->D,
                                ld, &algo, ctx->lt_workspace, ctx->lt_workspace_size, ctx->stream));
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(desc);
}
#endif /* LLMC_HOST_CUDA */

/* The bias epilogue needs a 16-byte aligned bias: cuBLASLt's alignment preferences cover A, B, C,
 * D only, so the heuristic may pick a kernel that assumes it, which then faults with "misaligned
 * address" (a known cuBLASLt behaviour; PyTorch falls back to an unfused add the same way). Every
 * bias is aligned unless a layer table with sum_l 3 A_l not divisible by 8 shifts the parameter
 * tensors (explicit head sizes with h d % 8 != 0). Then: plain matmul, bias add, GELU kernel. */
static void matmul_forward_unfused(floatX *out, const floatX *inp, const floatX *W, const floatX *bias,
                                   size_t N, int IC, int OC, floatX *pre_gelu, const GpuCtx *ctx) {
    floatX *y = pre_gelu != NULL ? pre_gelu : out;
    matmul_forward(y, inp, W, NULL, N, IC, OC, NULL, ctx);
    add_bias(y, bias, N, OC, ctx->stream);
    if (pre_gelu != NULL) gelu_forward(out, pre_gelu, N * (size_t)OC, ctx->stream);
}

void matmul_forward(floatX *out, const floatX *inp, const floatX *W, const floatX *bias, size_t N,
                    int IC, int OC, floatX *pre_gelu, const GpuCtx *ctx) {
    if (bias != NULL && ((uintptr_t)bias & 15u) != 0) {
        matmul_forward_unfused(out, inp, W, bias, N, IC, OC, pre_gelu, ctx);
        return;
    }
    /* out^T (OC x N) = W^T . x^T (header) */
    LtMatmul mm = lt_problem(true, false, (uint64_t)OC, (uint64_t)N, (uint64_t)IC, W, IC, inp, IC, out, OC);
    mm.bias = bias;
    if (pre_gelu != NULL) {
        mm.epilogue = bias != NULL ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
        mm.aux = pre_gelu;
        mm.ld_aux = OC;
    } else {
        mm.epilogue = bias != NULL ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    }
    lt_matmul(&mm, ctx);
}

void matmul_backward(floatX *dinp, floatX *dW, floatX *dbias, float *scratch, const floatX *dout,
                     const floatX *inp, const floatX *W, size_t N, int IC, int OC,
                     const floatX *dgelu_aux, const GpuCtx *ctx) {
    if (dinp != NULL) {
        /* dinp^T (IC x N) = W . dout^T */
        LtMatmul mm = lt_problem(false, false, (uint64_t)IC, (uint64_t)N, (uint64_t)OC, W, IC, dout, OC, dinp, IC);
        if (dgelu_aux != NULL) {
            mm.epilogue = CUBLASLT_EPILOGUE_DGELU;
            mm.aux = dgelu_aux;
            mm.ld_aux = IC;
        }
        lt_matmul(&mm, ctx);
    }
    /* dW^T (IC x OC) += x^T . dout */
    LtMatmul mw = lt_problem(false, true, (uint64_t)IC, (uint64_t)OC, (uint64_t)N, inp, IC, dout, OC, dW, IC);
    mw.accumulate = true;
    lt_matmul(&mw, ctx);
    if (dbias != NULL) bias_backward(dbias, dout, scratch, N, OC, ctx->stream);
}
