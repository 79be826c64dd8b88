/*
 * test/test_mma_emul.cpp: the register-tile attention kernels (llmc/attention/mma.h, forward and
 * backward) executed on the CPU, every thread of every block as its own coroutine with PTX's
 * mma.sync, ldmatrix, shuffle and cp.async semantics (test/warp_emul.h), against the CPU model's
 * attention (dev/cuda/attention_ref.h, the reference of the GPU checks). The CUDA kernels
 * (llmc/attention/mma.cu) run exactly these routines, so the fragment bookkeeping (which
 * lane holds which score, probability and output element), the causal mask, the online softmax,
 * the copy pipeline's phases and the rows past T are checked without a GPU. What it cannot check:
 * that the PTX ISA's layouts, which warp_emul.cpp implements from the ISA's text, are the
 * hardware's (dev/cuda/attention_mma does that on a GPU), races the schedule did not reach, speed.
 *
 * Also checks the emulator itself: shuffles, an mma against a plain product with fragments packed
 * by this file's own reading of the layouts, ldmatrix.x4 (plain and .trans) against the ISA's
 * fragment table read independently here, that a lane leaving its warp's collective or a
 * barrier reached unequally ends the run with exit status 1, that its shared-memory race
 * tracking passes a barrier-separated exchange and stops a read-after-write and a
 * write-after-read without a barrier, and cp.async: copy and zero-fill, a read while the copy is
 * in flight, a read by another warp after the wait but before a barrier, a copy never committed
 * (wait_group 0 leaves it in flight), a thread that returns with one in flight. Every kernel
 * block runs under that tracking (test/flash_mma_emul.h), so a missing barrier ends the test at
 * the first race.
 *
 * It also counts the kernels' work with the emulator: the mma of the forward and dQ must be the
 * causal minimum, the 128-row tiles must cut the ldmatrix per mma, and no ldmatrix may
 * have a shared-memory bank conflict.
 *
 * Shared memory and outputs are NaN before every block: a value read before it is written, or an
 * output never written, fails. Tolerance TOL_FWD = 2^-6 (max |x - ref| / max |ref|), the GPU
 * checks'; the control (the mask one key ahead) must exceed it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../dev/cuda/attention_ref.h"
#include "../llmc/attention/mma.h"
#include "harness.h"
#include "flash_mma_emul.h"
#include "warp_emul.h"


static void *nan_alloc(size_t bytes) {
    void *p = xmalloc(bytes);
    memset(p, 0xff, bytes); /* 0xffff bf16 and 0xffffffff fp32 are NaN */
    return p;
}

static void emulate_forward(const FlashArgs *a) { fmma_emulate(a, FMMA_FWD); }

/* The inputs, shape, block tile rows bq and scale 1/sqrt(d) of one call; no outputs set. */
static FlashArgs args_of(const uint16_t *qkv, const uint16_t *dout, int B, int T, int h, int d, int bq) {
    FlashArgs a;
    memset(&a, 0, sizeof(a));
    a.qkv = qkv;
    a.dout = dout;
    a.B = B;
    a.T = T;
    a.h = h;
    a.d = d;
    a.BLK = bq;
    a.scale = 1.0f / sqrtf((float)d);
    return a;
}

/* The backward into a fresh NaN-filled dqkv (caller frees): D = dO . O per row, then the dK/dV
 * and dQ kernels. out: the forward output D is taken from; scale: the backward's 1/sqrt(d). */
static uint16_t *emulate_backward(FlashArgs a, const uint16_t *out, float scale) {
    const size_t n3 = (size_t)a.B * a.T * 3 * a.h * a.d, rows = (size_t)a.B * a.h * a.T;
    uint16_t *dqkv = (uint16_t *)nan_alloc(n3 * 2);
    float *D = (float *)nan_alloc(rows * 4);
    a.out = out;
    a.dqkv = dqkv;
    a.D = D;
    a.scale = scale;
    for (size_t r = 0; r < rows; r++) flash_delta_row(&a, r);
    fmma_emulate_backward(&a);
    free(D);
    return dqkv;
}


/* One shape with the blocks' own tiles (queries; dK/dV: keys) of bq rows (64 or 128: the kernels
 * take either at any d, though the GPU build has 128 only up to FMMA_RW2_MAX_D). */
static void test_case(int B, int T, int h, int d, int bq) {
    const size_t A = (size_t)h * d, N = (size_t)B * T, A3 = 3 * A;
    uint16_t *qkv = (uint16_t *)xmalloc(N * A3 * 2), *dout = (uint16_t *)xmalloc(N * A * 2);
    fill_random_bf16(qkv, N * A3, 700 + d + T);
    fill_random_bf16(dout, N * A, 800 + d + T);
    float *fq = widen(qkv, N * A3), *fd = widen(dout, N * A);
    float *ro = (float *)xmalloc(N * A * 4), *rl = (float *)xmalloc((size_t)B * h * T * 4);
    float *rc = (float *)xmalloc(N * A * 4), *rd = (float *)xmalloc(N * A3 * 4);
    ref_attention(ro, rl, rd, fq, fd, B, T, h, d);

    FlashArgs a = args_of(qkv, dout, B, T, h, d, bq);
    uint16_t *out = (uint16_t *)nan_alloc(N * A * 2);
    float *lse = (float *)nan_alloc((size_t)B * h * T * 4);
    a.o = out;
    a.lse = lse;
    const long long n0 = warp_emul_count();
    emulate_forward(&a);
    const long long ops = warp_emul_count() - n0;
    char tag[96];
    snprintf(tag, sizeof(tag), "d %3d (B %d T %3d h %d, tiles of %3d)", d, B, T, h, bq);
    const double ef = rel_err_bf(out, A, ro, A, N, A), el = rel_err_f(lse, rl, (size_t)B * h * T);
    CHECK(ef <= TOL_FWD && el <= TOL_FWD && ops > 0,
          "%s forward: out rel error %.2e, lse %.2e (<= %.2e); %lld warp instructions and barriers", tag, ef, el,
          TOL_FWD, ops);
    if (T > 1) {
        ref_attention_one_ahead(rc, ro, fq, B, T, h, d);
        const double c = rel_err_bf(out, A, rc, A, N, A);
        CHECK(c > TOL_FWD, "%s control: vs the mask one key ahead %.2e (> tol)", tag, c);
    } else {
        not_applicable(tag, "one key ahead", "T = 1: no key ahead");
    }

    {
        const char *names[3] = {"dq", "dk", "dv"};
        uint16_t *dqkv = emulate_backward(a, out, a.scale);
        for (int w = 0; w < 3; w++) {
            const double e = ref_worst_grad(dqkv, rd, N, A, w, w + 1);
            CHECK(e <= TOL_BWD, "%s backward %s: rel error %.2e (<= %.2e)", tag, names[w], e, TOL_BWD);
        }
        free(dqkv);
        /* controls: D = dO . O left out (the output read as zeros), and the scale left out */
        uint16_t *zeros = (uint16_t *)xmalloc(N * A * 2);
        memset(zeros, 0, N * A * 2);
        dqkv = emulate_backward(a, zeros, a.scale);
        const double c_d = ref_worst_grad(dqkv, rd, N, A, 0, 2);
        free(dqkv);
        dqkv = emulate_backward(a, out, 1.0f);
        const double c_s = ref_worst_grad(dqkv, rd, N, A, 0, 3);
        free(dqkv);
        free(zeros);
        if (T > 1) {
            CHECK(c_d > TOL_BWD && c_s > TOL_BWD,
                  "%s controls: dq, dk without D %.2e, gradients without the scale %.2e (> tol)", tag, c_d, c_s);
        } else {
            not_applicable(tag, "backward controls", "T = 1: P = 1, so dq and dk vanish with or without D");
        }
    }
    free(qkv); free(dout); free(fq); free(fd); free(ro); free(rl); free(rc); free(rd); free(out); free(lse);
}

/* The work of the three kernels, counted by the emulator at d 64 for both tile sizes, at T 320
 * (2.5 tiles of 128 rows, 5 of 64) and T 288 (a 32-row warp of the last tile past T): the mma
 * count must be the causal minimum at each kernel's granularity, so no warp computes a tile none
 * of its rows sees (nor a warp whose rows are all past T, but for the one-group dK/dV, which
 * skips none), the barriers one per step (two stages at d 64), and at T 320 the two-group tiles
 * must cut the ldmatrix per mma (their B operands serve both of a warp's groups).
 *   forward, dQ  every 16-query group before T times the 64-key tiles up to it (r / 64 + 1 for
 *                the group at row r), times d (forward: S = Q K^T and P V, d / 2 each) or 3 d / 2
 *                (dQ: S, dP = dO V^T and dS K); blocks step over the key tiles up to their last
 *                row before T
 *   dK/dV        every 16-key group of a warp that works (two groups: warps whose first key is
 *                before T; one group: every warp of a tile) times the query sub-steps from the
 *                one holding its first key to the end of the last 64-query tile (one group: 64
 *                queries, 2 d mma: S^T, dP^T, P^T dO, dS^T Q at d / 2 each; two groups: 32
 *                queries, d mma); blocks step over the query tiles from their first key on */
static void work_case(int T, double ratio[2][3]) {
    const int B = 1, h = 1, d = 64;
    const size_t A = (size_t)h * d, N = (size_t)B * T;
    uint16_t *qkv = (uint16_t *)xmalloc(N * 3 * A * 2), *dout = (uint16_t *)xmalloc(N * A * 2);
    fill_random_bf16(qkv, N * 3 * A, 901);
    fill_random_bf16(dout, N * A, 902);
    uint16_t *out = (uint16_t *)nan_alloc(N * A * 2), *dqkv = (uint16_t *)nan_alloc(N * 3 * A * 2);
    float *lse = (float *)nan_alloc((size_t)B * h * T * 4), *D = (float *)nan_alloc((size_t)B * h * T * 4);
    long long pairs = 0; /* (16-query group, key tile) pairs the causal mask leaves */
    for (int r = 0; r < T; r += 16) pairs += r / 64 + 1;
    const int qend = (T + 63) / 64 * 64; /* the end of the last 64-query tile */
    const char *names[3] = {"forward", "dK/dV", "dQ"};
    for (int two = 0; two < 2; two++) {
        FlashArgs a = args_of(qkv, dout, B, T, h, d, two ? 2 * FMMA_BQ : FMMA_BQ);
        a.o = out;
        a.lse = lse;
        a.out = out;
        a.dqkv = dqkv;
        a.D = D;
        const int sub = two ? 32 : 64, bq = a.BLK; /* the dK/dV kernel's query sub-step; block rows */
        const int kend = two ? (T + 31) / 32 * 32 : qend; /* the end of the keys of working warps */
        long long kv_pairs = 0;                          /* (16-key group, sub-step) pairs */
        for (int k = 0; k < kend; k += 16) kv_pairs += (qend - k / sub * sub) / sub;
        long long steps_q = 0, steps_k = 0; /* block steps: forward and dQ, dK/dV */
        for (int r0 = 0; r0 < T; r0 += bq) {
            steps_q += ((r0 + bq < T ? r0 + bq : T) - 1) / 64 + 1;
            steps_k += qend / 64 - r0 / 64;
        }
        const int kinds[3] = {FMMA_FWD, FMMA_DKDV, FMMA_DQ};
        for (int kind : kinds) {
            if (kind == FMMA_DKDV)
                for (size_t r = 0; r < (size_t)B * h * T; r++) flash_delta_row(&a, r);
            const WarpEmulCounts c0 = warp_emul_counts();
            fmma_emulate(&a, kind);
            const WarpEmulCounts c1 = warp_emul_counts();
            const long long mma = c1.mma - c0.mma, ldsm = c1.ldmatrix - c0.ldmatrix;
            const long long want = kind == FMMA_FWD ? pairs * d : kind == FMMA_DQ ? pairs * 3 * d / 2
                                                                                  : kv_pairs * 2 * d * sub / 64;
            const long long bars = c1.barriers - c0.barriers, want_bars = kind == FMMA_DKDV ? steps_k : steps_q;
            ratio[two][kind] = (double)ldsm / (double)mma;
            CHECK(mma == want && bars == want_bars, "work, T %d, %s, tiles of %3d rows: %lld mma (the causal minimum: "
                  "%lld), %lld ldmatrix.x4, %.3f per mma, %lld barriers (one per step: %lld)", T, names[kind], a.BLK,
                  mma, want, ldsm, ratio[two][kind], bars, want_bars);
        }
    }
    free(qkv); free(dout); free(out); free(dqkv); free(lse); free(D);
}

static void test_work(void) {
    double ratio[2][3] = {{0, 0, 0}, {0, 0, 0}}; /* [64-row tiles, 128][kind]: ldmatrix per mma */
    work_case(288, ratio);
    work_case(320, ratio);
    /* forward and dQ halve their B operand loads; dK/dV reloads its A operands (K, V) in each of
     * its two sub-steps, so it saves a third */
    const char *names[3] = {"forward", "dK/dV", "dQ"};
    const double most[3] = {0.6, 0.7, 0.6};
    for (int k = 0; k < 3; k++)
        CHECK(ratio[1][k] <= most[k] * ratio[0][k], "work, T 320, %s: ldmatrix.x4 per mma %.3f with 128-row tiles, "
              "%.3f with 64 (ratio %.2f <= %.1f)", names[k], ratio[1][k], ratio[0][k], ratio[1][k] / ratio[0][k],
              most[k]);
}

/* Shared-memory bank conflicts of every kernel's ldmatrix, counted by the emulator: with rows
 * padded to d + 8 elements (4 mod 8 words) the 8 rows of each 8 x 8 matrix must fall on 32
 * different banks, one wavefront per matrix, at every d, with both tile sizes. */
static void test_banks(void) {
    const int B = 1, T = 130, h = 1;
    const int ds[] = {16, 32, 48, 64, 80, 128, 192, 256};
    for (int d : ds) {
        const size_t A = (size_t)h * d, N = (size_t)B * T;
        uint16_t *qkv = (uint16_t *)xmalloc(N * 3 * A * 2), *dout = (uint16_t *)xmalloc(N * A * 2);
        fill_random_bf16(qkv, N * 3 * A, 903);
        fill_random_bf16(dout, N * A, 904);
        uint16_t *out = (uint16_t *)nan_alloc(N * A * 2), *dqkv = (uint16_t *)nan_alloc(N * 3 * A * 2);
        float *lse = (float *)nan_alloc((size_t)B * h * T * 4), *D = (float *)nan_alloc((size_t)B * h * T * 4);
        long long ldsm = 0, wf = 0;
        const int bqs[] = {FMMA_BQ, 2 * FMMA_BQ};
        for (int bq : bqs) {
            FlashArgs a = args_of(qkv, dout, B, T, h, d, bq);
            a.o = out;
            a.lse = lse;
            a.out = out;
            a.dqkv = dqkv;
            a.D = D;
            const WarpEmulCounts c0 = warp_emul_counts();
            fmma_emulate(&a, FMMA_FWD);
            for (size_t r = 0; r < (size_t)B * h * T; r++) flash_delta_row(&a, r);
            fmma_emulate_backward(&a);
            const WarpEmulCounts c1 = warp_emul_counts();
            ldsm += c1.ldmatrix - c0.ldmatrix;
            wf += c1.ldmatrix_wavefronts - c0.ldmatrix_wavefronts;
        }
        CHECK(ldsm > 0 && wf == 4 * ldsm, "banks, d %3d: %lld ldmatrix.x4 in the forward and backward (both query "
              "tiles), %lld wavefronts (no conflict: %lld)", d, ldsm, wf, 4 * ldsm);
        free(qkv); free(dout); free(out); free(dqkv); free(lse); free(D);
    }
}

/* ---------------------------------------------------------------------------------------------
 * The emulator */
static float g_shfl_out[32][2];

static void shfl_thread(int tid, void *p) {
    (void)p;
    g_shfl_out[tid][0] = warp_emul_shfl_xor((float)tid, 1);
    g_shfl_out[tid][1] = warp_emul_shfl_xor((float)(100 + tid), 6);
}

/* A (16 x 16) and B (16 x 8) packed per lane by the PTX ISA's tables, read independently of
 * warp_emul.cpp: a register holds two consecutive elements of one row (A) or column (B). */
static float g_A[16][16], g_B[16][8], g_C[32][4];

static void mma_thread(int tid, void *p) {
    (void)p;
    const int g = tid >> 2, t = tid & 3;
    uint32_t a[4], b[2];
    const int arow[4] = {g, g + 8, g, g + 8}, acol[4] = {2 * t, 2 * t, 2 * t + 8, 2 * t + 8};
    for (int r = 0; r < 4; r++) a[r] = fmma_pack(g_A[arow[r]][acol[r]], g_A[arow[r]][acol[r] + 1]);
    for (int r = 0; r < 2; r++) b[r] = fmma_pack(g_B[2 * t + 8 * r][g], g_B[2 * t + 8 * r + 1][g]);
    float c[4] = {1.0f, 2.0f, 3.0f, 4.0f};
    warp_emul_mma_bf16_16816(c, a, b);
    memcpy(g_C[tid], c, sizeof(c));
}

static void diverge_thread(int tid, void *p) {
    (void)p;
    if (tid == 5) return; /* leaves its warp at the shuffle */
    warp_emul_shfl_xor(1.0f, 1);
}

/* thread 40 (warp 1) reads what thread 0 (warp 0) wrote: with a barrier between (race_free), and
 * without (racy); and a write after another warp's read in the same interval (war) */
alignas(16) static char g_sm[64];
static void race_free_thread(int tid, void *p) {
    (void)p;
    float v = 1.0f;
    if (tid == 0) fmma_stf((float *)g_sm, v);
    warp_emul_syncthreads();
    if (tid == 40) v = fmma_ldf((const float *)g_sm);
    warp_emul_syncthreads();
    if (tid == 0) fmma_stf((float *)g_sm, v);
}
static void racy_thread(int tid, void *p) {
    (void)p;
    if (tid == 0) fmma_stf((float *)g_sm, 1.0f);
    if (tid == 40) (void)fmma_ldf((const float *)g_sm);
    warp_emul_syncthreads();
}
static void war_thread(int tid, void *p) { /* threads run in tid order: 0 reads first */
    (void)p;
    if (tid == 0) (void)fmma_ldf((const float *)(g_sm + 8));
    if (tid == 40) fmma_stf((float *)(g_sm + 8), 1.0f);
    warp_emul_syncthreads();
}

/* ldmatrix.x4: a 16 x 32 bf16 tile (row stride 40 elements) whose element (r, c) is r * 64 + c;
 * lane L addresses row L % 16, column 8 (L / 16) (matrices: rows 0-7 / 8-15 x columns 0-7, then
 * x columns 8-15), as the kernels do; g_ld holds what each lane received, plain and .trans */
alignas(16) static uint16_t g_tile[16 * 40];
static uint32_t g_ld[32][2][4];
static void ldsm_thread(int tid, void *p) {
    (void)p;
    const uint16_t *row = g_tile + (tid & 15) * 40 + 8 * (tid >> 4);
    fmma_ldsm_x4(g_ld[tid][0], row);
    fmma_ldsm_x4_t(g_ld[tid][1], row);
}
/* the same tile read with a row stride of 32 elements (64 bytes, 16 words): rows r and r + 2 of a
 * matrix fall on the same banks, so each matrix takes 4 wavefronts instead of 1 */
static void ldsm_conflict_thread(int tid, void *p) {
    (void)p;
    uint32_t d[4];
    fmma_ldsm_x4(d, g_tile + (tid & 15) * 32 + 8 * (tid >> 4));
}
static void ldsm_misaligned_thread(int tid, void *p) {
    (void)p;
    uint32_t d[4];
    fmma_ldsm_x4(d, g_tile + (tid & 15) * 40 + 8 * (tid >> 4) + (tid == 9)); /* lane 9: 2 bytes off */
}

static void ldsm_outside_thread(int tid, void *p) {
    (void)p;
    uint32_t d[4];
    fmma_ldsm_x4(d, g_tile + (tid & 15) * 40 + 8 * (tid >> 4) + (tid == 31 ? 16 * 40 : 0)); /* lane 31: past the end */
}

/* cp.async: thread 0 copies 16 bytes (src_bytes 16) and zero-fills the next 16 (src_bytes 0) */
alignas(16) static uint16_t g_src[16];
static void cp_ok_thread(int tid, void *p) { /* issue, commit, wait, barrier, another warp reads */
    (void)p;
    if (tid == 0) {
        fmma_cp_async16((uint16_t *)g_sm, g_src, 16);
        fmma_cp_async16((uint16_t *)(g_sm + 16), g_src, 0);
        fmma_cp_commit();
        fmma_cp_wait();
    }
    warp_emul_syncthreads();
    if (tid == 40) (void)fmma_ldf((const float *)(g_sm + 28));
}
static void cp_inflight_thread(int tid, void *p) { /* a read before the copy's wait */
    (void)p;
    if (tid == 0) {
        fmma_cp_async16((uint16_t *)g_sm, g_src, 16);
        fmma_cp_commit();
    }
    warp_emul_syncthreads();
    if (tid == 40) (void)fmma_ldf((const float *)(g_sm + 4));
    warp_emul_syncthreads();
    if (tid == 0) fmma_cp_wait();
}
static void cp_nobarrier_thread(int tid, void *p) { /* waited for, but no barrier before the read */
    (void)p;
    if (tid == 0) {
        fmma_cp_async16((uint16_t *)g_sm, g_src, 16);
        fmma_cp_commit();
        fmma_cp_wait();
    }
    if (tid == 40) (void)fmma_ldf((const float *)(g_sm + 4));
    warp_emul_syncthreads();
}
static void cp_uncommitted_thread(int tid, void *p) { /* wait_group 0 does not wait for it */
    (void)p;
    if (tid == 0) {
        fmma_cp_async16((uint16_t *)g_sm, g_src, 16);
        fmma_cp_wait();
        (void)fmma_ldf((const float *)g_sm);
    }
}
static void cp_outside_thread(int tid, void *p) {
    (void)p;
    if (tid == 0) {
        fmma_cp_async16((uint16_t *)(g_sm + 64), g_src, 16); /* one past the registered 64 bytes */
        fmma_cp_commit();
        fmma_cp_wait();
    }
}
static void cp_unwaited_thread(int tid, void *p) {
    (void)p;
    if (tid == 0) {
        fmma_cp_async16((uint16_t *)g_sm, g_src, 16);
        fmma_cp_commit();
    }
}

static void mixed_thread(int tid, void *p) {
    (void)p;
    if (tid < 32) warp_emul_syncthreads();
    else warp_emul_shfl_xor(1.0f, 1);
    warp_emul_syncthreads();
}

/* Exit status of fn run as one block of n threads in a child process; its error line into msg. */
static int child_status(int n, WarpEmulFn fn, char *msg, size_t cap) {
    int fd[2];
    if (pipe(fd) != 0) return -1;
    fflush(stdout);
    fflush(stderr);
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 2);
        close(fd[0]);
        warp_emul_block(n, fn, NULL);
        _exit(0);
    }
    close(fd[1]);
    const ssize_t got = read(fd[0], msg, cap - 1);
    msg[got > 0 ? got : 0] = '\0';
    msg[strcspn(msg, "\n")] = '\0';
    close(fd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void test_emulator(void) {
    warp_emul_block(32, shfl_thread, NULL);
    int ok = 1;
    for (int L = 0; L < 32; L++) ok &= g_shfl_out[L][0] == (float)(L ^ 1) && g_shfl_out[L][1] == (float)(100 + (L ^ 6));
    CHECK(ok, "shfl.xor: lane L reads lane L ^ mask (masks 1 and 6)");

    uint64_t seed = 11;
    for (int i = 0; i < 16; i++)
        for (int k = 0; k < 16; k++) g_A[i][k] = bf16_to_f32(f32_to_bf16(rand_unit(&seed)));
    for (int k = 0; k < 16; k++)
        for (int j = 0; j < 8; j++) g_B[k][j] = bf16_to_f32(f32_to_bf16(rand_unit(&seed)));
    warp_emul_block(32, mma_thread, NULL);
    double worst = 0.0;
    for (int L = 0; L < 32; L++)
        for (int i = 0; i < 4; i++) {
            const int row = (L >> 2) + 8 * (i >> 1), col = 2 * (L & 3) + (i & 1);
            double s = 1.0 + i;
            for (int k = 0; k < 16; k++) s += (double)g_A[row][k] * g_B[k][col];
            worst = fmax(worst, fabs(s - g_C[L][i]));
        }
    CHECK(worst < 1e-4, "mma.m16n8k16: D = A B + C with the ISA's fragment layouts, max error %.1e", worst);

    char msg[256];
    CHECK(child_status(32, diverge_thread, msg, sizeof msg) == 1 && strstr(msg, "returned while its warp waits"),
          "a lane that returns while its warp waits at a shuffle ends the run: %s", msg);
    CHECK(child_status(64, mixed_thread, msg, sizeof msg) == 1 && strstr(msg, "others wait at the barrier"),
          "a barrier that one warp reaches twice and another once ends the run: %s", msg);
    warp_emul_shared(g_sm, sizeof g_sm);
    int st = child_status(64, race_free_thread, msg, sizeof msg);
    CHECK(st == 0, "shared memory written, barrier, read by another warp, barrier, written again: no race (exit %d "
          "%s)", st, msg);
    st = child_status(64, racy_thread, msg, sizeof msg);
    CHECK(st == 1 && strstr(msg, "thread 40 reads byte 0, which thread 0 wrote"),
          "a read of another thread's write without a barrier between ends the run: %s", msg);
    st = child_status(64, war_thread, msg, sizeof msg);
    CHECK(st == 1 && strstr(msg, "thread 40 writes byte 8, which thread 0 read"),
          "a write after another thread's read without a barrier between ends the run: %s", msg);

    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 40; c++) g_tile[r * 40 + c] = (uint16_t)(r * 64 + c);
    warp_emul_shared(g_tile, sizeof g_tile);
    const long long wf0 = warp_emul_counts().ldmatrix_wavefronts;
    warp_emul_block(32, ldsm_thread, NULL);
    const long long wf1 = warp_emul_counts().ldmatrix_wavefronts;
    warp_emul_block(32, ldsm_conflict_thread, NULL);
    const long long wf2 = warp_emul_counts().ldmatrix_wavefronts;
    CHECK(wf1 - wf0 == 8 && wf2 - wf1 == 16, "ldmatrix bank count: rows 80 bytes apart %lld wavefronts for two x4 "
          "(no conflict: 8), rows 64 bytes apart %lld for one (4-way: 16)", wf1 - wf0, wf2 - wf1);
    int ok_plain = 1, ok_trans = 1;
    for (int L = 0; L < 32; L++) {
        const int g = L >> 2, t = L & 3;
        for (int i = 0; i < 4; i++) {
            /* matrix i covers rows 8 (i % 2) .., columns 8 (i / 2) ..: plain, the lane holds
             * (g, 2t), (g, 2t + 1) of it; .trans, (2t, g), (2t + 1, g) */
            const int r0 = 8 * (i & 1), c0 = 8 * (i >> 1);
            const uint32_t plain = (uint32_t)((r0 + g) * 64 + c0 + 2 * t) | ((uint32_t)((r0 + g) * 64 + c0 + 2 * t + 1) << 16);
            const uint32_t trans = (uint32_t)((r0 + 2 * t) * 64 + c0 + g) | ((uint32_t)((r0 + 2 * t + 1) * 64 + c0 + g) << 16);
            ok_plain &= g_ld[L][0][i] == plain;
            ok_trans &= g_ld[L][1][i] == trans;
        }
    }
    CHECK(ok_plain, "ldmatrix.x4: register i of lane 4g + t holds elements (g, 2t), (g, 2t + 1) of matrix i");
    CHECK(ok_trans, "ldmatrix.x4.trans: register i of lane 4g + t holds elements (2t, g), (2t + 1, g) of matrix i");
    CHECK(child_status(32, ldsm_misaligned_thread, msg, sizeof msg) == 1 && strstr(msg, "thread 9") &&
              strstr(msg, "not 16-byte aligned"),
          "an ldmatrix row address off 16 bytes ends the run: %s", msg);
    CHECK(child_status(32, ldsm_outside_thread, msg, sizeof msg) == 1 && strstr(msg, "ldmatrix row") &&
              strstr(msg, "outside the block's shared memory"),
          "an ldmatrix row outside the registered shared memory ends the run: %s", msg);
    warp_emul_shared(g_sm, sizeof g_sm);

    for (int i = 0; i < 16; i++) g_src[i] = (uint16_t)(0x3f80 + i);
    memset(g_sm, 0xff, sizeof g_sm);
    warp_emul_block(64, cp_ok_thread, NULL);
    CHECK(memcmp(g_sm, g_src, 16) == 0 && g_sm[16] == 0 && g_sm[31] == 0 && (unsigned char)g_sm[32] == 0xff,
          "cp.async: 16 bytes copied, 16 zero-filled (src_bytes 0), nothing else written; waited for and read by "
          "another warp after a barrier: no race");
    st = child_status(64, cp_inflight_thread, msg, sizeof msg);
    CHECK(st == 1 && strstr(msg, "thread 40 reads byte 4") && strstr(msg, "cp.async in flight"),
          "a read of bytes whose cp.async is not yet waited for ends the run, barrier or not: %s", msg);
    st = child_status(64, cp_nobarrier_thread, msg, sizeof msg);
    CHECK(st == 1 && strstr(msg, "thread 40 reads byte 4, which thread 0 wrote"),
          "a cp.async waited for counts as its thread's write: another warp's read needs a barrier: %s", msg);
    st = child_status(32, cp_uncommitted_thread, msg, sizeof msg);
    CHECK(st == 1 && strstr(msg, "thread 0 reads byte 0") && strstr(msg, "in flight"),
          "wait_group 0 does not wait for a copy never committed: %s", msg);
    st = child_status(32, cp_outside_thread, msg, sizeof msg);
    CHECK(st == 1 && strstr(msg, "cp.async destination") && strstr(msg, "outside"),
          "a cp.async into memory outside the registered shared memory ends the run: %s", msg);
    st = child_status(32, cp_unwaited_thread, msg, sizeof msg);
    CHECK(st == 1 && strstr(msg, "not waited for"), "a thread that returns with a copy in flight ends the run: %s", msg);
    warp_emul_shared(NULL, 0);
}

static void test_supports(void) {
    char why[256] = "";
    const size_t h200 = 232448, a100 = 166912;
    int ok = 1;
    for (int d = 16; d <= 256; d += 16)
        ok &= fmma_supports_dir(d, 0, 90, h200, why, sizeof why) && fmma_supports_dir(d, 0, 80, a100, why, sizeof why);
    CHECK(ok, "every d = 16 ... 256 runs on SM 9.0 and 8.0 (d 256: %zu bytes of shared memory)", fmma_smem_bytes(256));
    why[0] = 0;
    CHECK(!fmma_supports_dir(20, 0, 90, h200, why, sizeof why) && strstr(why, "multiple of 16"), "d 20 refused: %s", why);
    why[0] = 0;
    CHECK(!fmma_supports_dir(64, 0, 75, h200, why, sizeof why) && strstr(why, "SM 7.5"), "SM 7.5 refused: %s", why);
    why[0] = 0;
    CHECK(!fmma_supports_dir(256, 0, 90, 49152, why, sizeof why) && strstr(why, "shared memory"),
          "d 256 in 48 KiB refused: %s", why);
    /* Q (128 rows) and two stages of K, V (64 rows) of 72 bf16 at d 64; at d 80 Q has 64 rows */
    CHECK(fmma_smem_bytes(64) == (128 + 4 * 64) * 72 * 2 && fmma_smem_bytes(80) == 5 * 64 * 88 * 2,
          "d 64: %zu bytes (by hand %d), d 80: %zu (%d)", fmma_smem_bytes(64), (128 + 4 * 64) * 72 * 2,
          fmma_smem_bytes(80), 5 * 64 * 88 * 2);
    /* training: the larger of the dK/dV block (d 128: K, V and two stages of Q, dO, lse, D; d 256:
     * one stage; d <= 64: K and V of 128 rows) and the dQ block (Q and dO of 128 rows at d <= 64)
     * fits an A100's 166912 bytes at every d */
    ok = 1;
    for (int d = 16; d <= 256; d += 16)
        ok &= fmma_supports_dir(d, 1, 90, h200, why, sizeof why) && fmma_supports_dir(d, 1, 80, a100, why, sizeof why);
    const size_t b128 = fmma_smem_bytes_kind(FMMA_DKDV, 128), b256 = fmma_smem_bytes_kind(FMMA_DKDV, 256);
    CHECK(ok && b128 == 6 * 64 * 136 * 2 + 2 * 2 * 64 * 4 && b256 == 4 * 64 * 264 * 2 + 2 * 64 * 4 &&
              fmma_smem_bytes_kind(FMMA_DQ, 256) == 4 * 64 * 264 * 2 && fmma_smem_bytes(256) == 3 * 64 * 264 * 2,
          "training: every d up to 256 on an H200 and an A100 (dK/dV at d 128: %zu bytes, at d 256: %zu)", b128, b256);
    why[0] = 0;
    CHECK(!fmma_supports_dir(256, 1, 80, 131072, why, sizeof why) && strstr(why, "shared memory"),
          "training d 256 in 128 KiB refused: %s", why);
    /* an SM 8.6 GPU's 101376 bytes: training up to d 112 (d 128's two stages take 105472 bytes)
     * and at d 144-176 (one stage), forward at every d (d 256: exactly 101376) */
    const size_t sm86 = 101376;
    char list[128] = "";
    ok = 1;
    for (int d = 16; d <= 256; d += 16) {
        const int train = fmma_supports_dir(d, 1, 86, sm86, why, sizeof why);
        ok &= fmma_supports_dir(d, 0, 86, sm86, why, sizeof why);
        ok &= train == (d <= 112 || (d >= 144 && d <= 176));
        if (train) snprintf(list + strlen(list), sizeof(list) - strlen(list), " %d", d);
    }
    CHECK(ok, "SM 8.6 (101376 bytes): forward at every d, training at d%s", list);
}

int main(void) {
    test_emulator();
    test_supports();
    test_work();
    test_banks();
    /* every shape with both query tiles: the default (fmma_block_rows) and the other */
    const int bqs[] = {2 * FMMA_BQ, FMMA_BQ};
    for (int bq : bqs) {
        const int ds[] = {16, 32, 48, 64, 80, 128, 256};
        for (int d : ds) test_case(1, 130, 1, d, bq);
        /* T around the tiles' edges: 64 and 128 rows, a 128-row tile whose second half is past T */
        const int Ts[] = {1, 33, 64, 65, 100, 127, 128, 129, 192, 200};
        for (int T : Ts) test_case(2, T, 2, 64, bq);
        test_case(1, 200, 3, 32, bq);
        test_case(2, 70, 2, 192, bq); /* dK and dV in two kernels */
    }
    return test_finish();
}
