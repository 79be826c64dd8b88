/*
 * test/test_flash_emul.c: the block routines of the flash attention kernels (llmc/attention/flash.h)
 * executed on the CPU, every block of the grid in turn (one "thread" runs all warps' work; the
 * tensor-core tile products become loops with the same bf16 operands and fp32 sums), compared
 * with the CPU model's attention (dev/cuda/attention_ref.h, the reference of the GPU checks).
 * The CUDA kernels (llmc/attention/flash.cu) run exactly these routines; this test checks their
 * tiling, causal masks, online softmax, padding past T and backward formulas without a GPU.
 * What it cannot check: races between threads and the WMMA fragment loads themselves (layouts,
 * alignment), which dev/cuda/attention_flash checks on a GPU.
 *
 * Shared memory and outputs are filled with NaN before every block, so a value read before it is
 * written, or an output element never written, fails the comparison.
 * Tolerances (metric of dev/cuda/check_common.h, max |x - ref| / max |ref|): the GPU checks' own,
 * TOL_FWD = 2^-6 for the output and the logsumexp, TOL_BWD = 2^-5 for dq, dk, dv (with the 1e-3
 * floor of test_sd_fold_emul for a gradient that is zero in exact arithmetic, T = 1), said in
 * dev/cuda/attention_ref.h. Controls that must exceed them: the mask one key ahead (forward), D
 * left out of dS (outputs zeroed: the backward's row term), and the 1/sqrt(d) scale left out.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../dev/cuda/attention_ref.h"
#include "../llmc/attention/flash.h"
#include "harness.h"

static void *nan_alloc(size_t bytes) {
    void *p = xmalloc(bytes);
    memset(p, 0xff, bytes); /* 0xffff bf16 and 0xffffffff fp32 are NaN */
    return p;
}

/* Every block of the kernels' grids: the forward, or the backward's D pass and both kernels. */
static void emulate(const FlashArgs *a, int forward) {
    const int nt = (a->T + a->BLK - 1) / a->BLK;
    const size_t bytes = flash_smem_max(a->BLK, a->d);
    char *smem = (char *)xmalloc(bytes);
    for (int bh = 0; bh < a->B * a->h; bh++)
        for (int t = 0; t < nt; t++) {
            if (forward) {
                memset(smem, 0xff, bytes);
                flash_fwd_block(a, t, bh, smem, 0, 1);
            } else {
                if (t == 0)
                    for (int i = 0; i < a->T; i++) flash_delta_row(a, (size_t)bh * a->T + i);
                memset(smem, 0xff, bytes);
                flash_dkdv_block(a, t, bh, smem, 0, 1);
                memset(smem, 0xff, bytes);
                flash_dq_block(a, t, bh, smem, 0, 1);
            }
        }
    free(smem);
}

/* Backward of the emulation into a fresh NaN-filled dqkv (caller frees). */
static uint16_t *emulate_backward(FlashArgs a, const uint16_t *out, float scale) {
    const size_t n3 = (size_t)a.B * a.T * 3 * a.h * a.d;
    uint16_t *dqkv = (uint16_t *)nan_alloc(n3 * 2);
    float *D = (float *)nan_alloc((size_t)a.B * a.h * a.T * 4);
    a.out = out;
    a.dqkv = dqkv;
    a.D = D;
    a.scale = scale;
    emulate(&a, 0);
    free(D);
    return dqkv;
}

static void test_case(int B, int T, int h, int d, int BLK) {
    const size_t A = (size_t)h * d, N = (size_t)B * T, A3 = 3 * A;
    uint16_t *qkv = (uint16_t *)xmalloc(N * A3 * 2), *dout = (uint16_t *)xmalloc(N * A * 2);
    fill_random_bf16(qkv, N * A3, 500 + d + T);
    fill_random_bf16(dout, N * A, 600 + d + T);
    float *fq = widen(qkv, N * A3), *fd = widen(dout, N * A);
    float *ro = (float *)xmalloc(N * A * 4), *rd = (float *)xmalloc(N * A3 * 4);
    float *rl = (float *)xmalloc((size_t)B * h * T * 4), *rc = (float *)xmalloc(N * A * 4);
    ref_attention(ro, rl, rd, fq, fd, B, T, h, d);

    FlashArgs a;
    memset(&a, 0, sizeof(a));
    a.qkv = qkv;
    a.dout = dout;
    a.B = B;
    a.T = T;
    a.h = h;
    a.d = d;
    a.BLK = BLK;
    a.scale = 1.0f / sqrtf((float)d);
    uint16_t *out = (uint16_t *)nan_alloc(N * A * 2);
    float *lse = (float *)nan_alloc((size_t)B * h * T * 4);
    a.o = out;
    a.lse = lse;
    emulate(&a, 1);
    char tag[96];
    snprintf(tag, sizeof(tag), "d %3d BLK %d (B %d T %3d h %d)", d, BLK, B, T, h);
    const double ef = rel_err_bf(out, A, ro, A, N, A), el = rel_err_f(lse, rl, (size_t)B * h * T);
    CHECK(ef <= TOL_FWD && el <= TOL_FWD, "%s forward: out rel error %.2e, lse %.2e (<= %.2e)", tag, ef, el, TOL_FWD);
    if (T > 1) {
        ref_attention_one_ahead(rc, ro, fq, B, T, h, d);
        const double c = rel_err_bf(out, A, rc, A, N, A);
        CHECK(c > TOL_FWD, "%s control: vs the mask one key ahead %.2e (> tol)", tag, c);
    } else {
        not_applicable(tag, "one key ahead", "T = 1: no key ahead");
    }

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
    CHECK(c_d > TOL_BWD && c_s > TOL_BWD, "%s controls: dq, dk without D %.2e, gradients without the scale %.2e (> tol)",
          tag, c_d, c_s);

    free(zeros); free(qkv); free(dout); free(fq); free(fd); free(ro); free(rd); free(rl); free(rc); free(out); free(lse);
}

/* The shared-memory layout: every region 128-byte aligned, in order, not overlapping, inside the
 * total; and one total computed by hand. */
static void test_layout(void) {
    int ok = 1;
    for (int kind = FLASH_FWD; kind <= FLASH_DQ; kind++)
        for (int d = 16; d <= FLASH_MAX_D; d += 16)
            for (int BLK = 32; BLK <= 64; BLK *= 2) {
                const size_t total = flash_smem_bytes(kind, BLK, d);
                FlashSmem s;
                char *base = (char *)xmalloc(total);
                flash_carve(kind, BLK, d, base, &s);
                const size_t tile = (size_t)BLK * flash_ldh(d) * 2, acc = (size_t)BLK * flash_ldf(d) * 4;
                const size_t sc = (size_t)BLK * flash_lds(BLK) * 4, pr = (size_t)BLK * flash_ldp(BLK) * 2;
                struct {
                    void *p;
                    size_t n;
                } reg[10] = {{s.Q, tile}, {s.K, tile}, {s.V, tile}, {s.V2, tile}, {s.S, sc}, {s.P, pr},
                             {s.acc0, acc}, {s.acc1, acc}, {s.r0, (size_t)BLK * 4}, {s.r1, (size_t)BLK * 4}};
                size_t end = 0;
                for (int i = 0; i < 10; i++) {
                    if (reg[i].p == NULL) continue;
                    const size_t off = (size_t)((char *)reg[i].p - base);
                    ok &= off % 128 == 0 && off >= end;
                    end = off + reg[i].n;
                }
                free(base);
                ok &= end == total && s.Q != NULL && s.acc0 != NULL && s.r1 != NULL;
                ok &= (kind == FLASH_FWD) == (s.V2 == NULL) && (kind == FLASH_DKDV) == (s.acc1 != NULL);
            }
    /* fp32 rows 32-byte aligned (the PTX rule for wmma.load/store of fp32 accumulators), bf16 rows
     * 16-byte aligned, for every d the kernels take */
    for (int d = 16; d <= FLASH_MAX_D; d += 16)
        for (int BLK = 32; BLK <= 64; BLK *= 2)
            ok &= flash_ldf(d) * 4 % 32 == 0 && flash_lds(BLK) * 4 % 32 == 0 && flash_ldh(d) * 2 % 16 == 0 &&
                  flash_ldp(BLK) * 2 % 16 == 0;
    CHECK(ok, "shared-memory regions of all kinds, d 16..256, BLK 32/64: aligned, disjoint, inside the total; row "
              "strides aligned as wmma.load/store require");
    /* forward, BLK 64, d 64: Q K V 3 x 64 x 72 x 2, S 64 x 72 x 4, P 64 x 72 x 2, O 64 x 72 x 4, m and
     * l 2 x 256 */
    const size_t want = 3 * 9216 + 18432 + 9216 + 18432 + 2 * 256;
    CHECK(flash_smem_bytes(FLASH_FWD, 64, 64) == want, "forward BLK 64 d 64: %zu bytes (by hand %zu)",
          flash_smem_bytes(FLASH_FWD, 64, 64), want);
}

static void test_choose(void) {
    char why[256] = "";
    const size_t h200 = 232448, a100 = 166912; /* cudaDevAttrMaxSharedMemoryPerBlockOptin */
    CHECK(flash_choose(16, h200, why, sizeof why) == 64 && flash_choose(64, h200, why, sizeof why) == 64 &&
              flash_choose(48, a100, why, sizeof why) == 64,
          "d 16, 48, 64: tiles of 64 rows");
    CHECK(flash_choose(128, h200, why, sizeof why) == 32 && flash_choose(256, a100, why, sizeof why) == 32 &&
              flash_choose(80, a100, why, sizeof why) == 32,
          "d 80, 128, 256: tiles of 32 rows (256 fits an A100: %zu bytes)", flash_smem_max(32, 256));
    why[0] = 0;
    const int bad = flash_choose(8, h200, why, sizeof why) + flash_choose(20, h200, NULL, 0) +
                    flash_choose(272, h200, NULL, 0) + flash_choose(0, h200, NULL, 0);
    CHECK(bad == 0 && strstr(why, "multiple of 16") != NULL, "d 8, 20, 272, 0 refused: %s", why);
    why[0] = 0;
    CHECK(flash_choose(64, 49152, why, sizeof why) == 32 && flash_choose(256, 49152, why, sizeof why) == 0 &&
              strstr(why, "shared memory") != NULL,
          "48 KiB: d 64 drops to 32 rows, d 256 refused: %s", why);
}

int main(void) {
    test_layout();
    test_choose();
    /* B, T, h, d, BLK: T not a multiple of the tile, one row, exactly one tile, several tiles;
     * every d the kernels take that the trainer's schedules use, and 48, 80 (not powers of 2) */
    static const int cases[][5] = {{2, 127, 2, 64, 64}, {1, 130, 2, 64, 32}, {2, 70, 2, 16, 64}, {1, 100, 1, 32, 64},
                                   {1, 64, 1, 48, 64},  {1, 1, 2, 64, 64},   {1, 65, 2, 128, 32}, {1, 33, 1, 80, 32},
                                   {1, 40, 1, 256, 32}, {1, 200, 1, 64, 64}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        test_case(cases[i][0], cases[i][1], cases[i][2], cases[i][3], cases[i][4]);
    return test_finish();
}
