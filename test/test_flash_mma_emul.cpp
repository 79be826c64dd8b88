/*
 * test/test_flash_mma_emul.cpp: the register-tile attention forward (llmc/flash_mma.h) executed on
 * the CPU, every thread of every block as its own coroutine with PTX's mma.sync and shuffle
 * semantics (test/warp_emul.h), against the CPU model's attention (dev/cuda/attention_ref.h, the
 * reference of the GPU checks). The CUDA kernel (llmc/attention_flash_mma.cu) runs exactly this
 * routine, so the fragment bookkeeping (which lane holds which score, probability and output
 * element), the causal mask, the online softmax and the rows past T are checked without a GPU.
 * What it cannot check: that the PTX ISA's fragment layouts, which warp_emul.cpp implements from
 * the ISA's text, are the hardware's (dev/cuda/attention_mma does that on a GPU), races, speed.
 *
 * Also checks the emulator itself: shuffles, an mma against a plain product with fragments packed
 * by this file's own reading of the layouts, that a lane leaving its warp's collective or a
 * barrier reached unequally ends the run with exit status 1, and that its shared-memory race
 * tracking passes a barrier-separated exchange and stops a read-after-write and a
 * write-after-read without a barrier. Every kernel block runs under that tracking
 * (test/flash_mma_emul.h), so a missing barrier ends the test at the first race.
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
#include "../llmc/flash_mma.h"
#include "harness.h"
#include "flash_mma_emul.h"
#include "warp_emul.h"


static void *nan_alloc(size_t bytes) {
    void *p = xmalloc(bytes);
    memset(p, 0xff, bytes); /* 0xffff bf16 and 0xffffffff fp32 are NaN */
    return p;
}

static void emulate_forward(const FlashArgs *a) { fmma_emulate(a, FMMA_FWD); }

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


static void test_case(int B, int T, int h, int d) {
    const size_t A = (size_t)h * d, N = (size_t)B * T, A3 = 3 * A;
    uint16_t *qkv = (uint16_t *)xmalloc(N * A3 * 2), *dout = (uint16_t *)xmalloc(N * A * 2);
    fill_random_bf16(qkv, N * A3, 700 + d + T);
    fill_random_bf16(dout, N * A, 800 + d + T);
    float *fq = widen(qkv, N * A3), *fd = widen(dout, N * A);
    float *ro = (float *)xmalloc(N * A * 4), *rl = (float *)xmalloc((size_t)B * h * T * 4);
    float *rc = (float *)xmalloc(N * A * 4), *rd = (float *)xmalloc(N * A3 * 4);
    ref_attention(ro, rl, rd, fq, fd, B, T, h, d);

    FlashArgs a;
    memset(&a, 0, sizeof(a));
    a.qkv = qkv;
    a.dout = dout;
    a.B = B;
    a.T = T;
    a.h = h;
    a.d = d;
    a.scale = 1.0f / sqrtf((float)d);
    uint16_t *out = (uint16_t *)nan_alloc(N * A * 2);
    float *lse = (float *)nan_alloc((size_t)B * h * T * 4);
    a.o = out;
    a.lse = lse;
    const long long n0 = warp_emul_count();
    emulate_forward(&a);
    const long long ops = warp_emul_count() - n0;
    char tag[96];
    snprintf(tag, sizeof(tag), "d %3d (B %d T %3d h %d)", d, B, T, h);
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
static char g_sm[64];
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
    warp_emul_shared(NULL, 0);
}

static void test_supports(void) {
    char why[256] = "";
    const size_t h200 = 232448, a100 = 166912;
    int ok = 1;
    for (int d = 16; d <= 256; d += 16) ok &= fmma_supports(d, 90, h200, why, sizeof why) && fmma_supports(d, 80, a100, why, sizeof why);
    CHECK(ok, "every d = 16 ... 256 runs on SM 9.0 and 8.0 (d 256: %zu bytes of shared memory)", fmma_smem_bytes(256));
    why[0] = 0;
    CHECK(!fmma_supports(20, 90, h200, why, sizeof why) && strstr(why, "multiple of 16"), "d 20 refused: %s", why);
    why[0] = 0;
    CHECK(!fmma_supports(64, 75, h200, why, sizeof why) && strstr(why, "SM 7.5"), "SM 7.5 refused: %s", why);
    why[0] = 0;
    CHECK(!fmma_supports(256, 90, 49152, why, sizeof why) && strstr(why, "shared memory"), "d 256 in 48 KiB refused: %s",
          why);
    /* Q and K 64 x 72 and V^T 64 x 72 bf16 at d 64 */
    CHECK(fmma_smem_bytes(64) == 3 * 64 * 72 * 2, "d 64: %zu bytes (by hand %d)", fmma_smem_bytes(64), 3 * 64 * 72 * 2);
    /* training: the dK/dV block (K, V, Q, dO 64 x (d + 8); Q^T, dO^T d x 72; lse, D) must fit; at
     * d 256 that is 209408 bytes: Hopper's 232448 yes, an A100's 166912 no */
    ok = 1;
    for (int d = 16; d <= 256; d += 16) ok &= fmma_supports_dir(d, 1, 90, h200, why, sizeof why);
    for (int d = 16; d <= 128; d += 16) ok &= fmma_supports_dir(d, 1, 80, a100, why, sizeof why);
    CHECK(ok && fmma_smem_bytes_kind(FMMA_DKDV, 256) == 4 * 64 * 264 * 2 + 2 * 256 * 72 * 2 + 2 * 64 * 4,
          "training: every d up to 256 on an H200, up to 128 on an A100 (dK/dV at d 256: %zu bytes)",
          fmma_smem_bytes_kind(FMMA_DKDV, 256));
    why[0] = 0;
    CHECK(!fmma_supports_dir(256, 1, 80, a100, why, sizeof why) && strstr(why, "shared memory"),
          "training d 256 on an A100 refused: %s", why);
}

int main(void) {
    test_emulator();
    test_supports();
    const int ds[] = {16, 32, 48, 64, 80, 128, 256};
    for (int d : ds) test_case(1, 130, 1, d);
    const int Ts[] = {1, 33, 64, 65, 100, 127};
    for (int T : Ts) test_case(2, T, 2, 64);
    test_case(1, 200, 3, 32);
    test_case(2, 70, 2, 192); /* dK and dV in two kernels */
    return test_finish();
}
