/*
 * test/test_scalar_math.c: the scalar formulas host and device code share (llmc/scalar_math.h).
 *
 *   - bf16_to_f32: every one of the 65536 bit patterns widens to exactly its bits << 16;
 *   - f32_to_bf16 against a reference that rounds by distance (computed in double, ties to the
 *     even pattern) rather than by the header's bit trick: at the midpoint between every two
 *     neighbouring finite bf16 values, one float step on either side of it, and on 2^22 random
 *     float patterns; overflow to infinity (FLT_MAX), signed zeros and infinities kept;
 *   - NaN: every NaN class (quiet, signalling, all mantissa bits set, both signs) stays a quiet NaN
 *     of the same sign; control: the bit trick without the NaN branch turns 0x7fffffff into a
 *     number, so the branch is what the check sees;
 *   - gelu_tanhf against the tanh formula in double within 2e-6 (1 + |x|) on [-10, 10], and
 *     gelu_tanh_gradf against a central difference of the double formula within 1e-5;
 *     control: the exact (erf) GELU is more than 1e-4 away somewhere, so the tolerance tells the
 *     approximation the model uses from the exact one.
 * Exact checks unless a tolerance is stated.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../llmc/scalar_math.h"
#include "harness.h"

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float float_of(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Round a finite float to bf16 by distance: the two bf16 patterns around it (the truncated one and
 * the next one away from zero), the nearer in double, a tie to the pattern with an even last bit. */
static uint16_t ref_bf16(float f) {
    const uint16_t lo = (uint16_t)(bits_of(f) >> 16), hi = (uint16_t)(lo + 1);
    const double dlo = fabs((double)f - bf16_to_f32(lo));
    const double vhi = (hi & 0x7fffu) == 0x7f80u ? ldexp(1.0, 128) * (f < 0 ? -1.0 : 1.0) : (double)bf16_to_f32(hi);
    const double dhi = fabs(vhi - (double)f);
    if (dlo != dhi) return dlo < dhi ? lo : hi;
    return (lo & 1u) ? hi : lo;
}

static void test_widen(void) {
    int exact = 1;
    for (uint32_t b = 0; b < 65536; b++) exact &= bits_of(bf16_to_f32((uint16_t)b)) == b << 16;
    CHECK(exact, "bf16_to_f32: all 65536 patterns widen to their bits << 16");
}

static void test_round(void) {
    int mid = 1, above = 1, below = 1, n = 0;
    for (uint32_t s = 0; s < 2; s++) {
        for (uint32_t m = 0; m < 0x7f7fu; m++) { /* every finite pattern but the largest */
            const uint16_t b = (uint16_t)((s << 15) | m);
            const double a = bf16_to_f32(b), c = bf16_to_f32((uint16_t)(b + 1));
            const float h = (float)((a + c) / 2); /* exact: bf16 has 8 significant bits, float 24 */
            const float up = float_of(bits_of(h) + 1), down = float_of(bits_of(h) - 1);
            mid &= f32_to_bf16(h) == ((b & 1u) ? b + 1 : b) && f32_to_bf16(h) == ref_bf16(h);
            above &= f32_to_bf16(up) == b + 1;
            below &= f32_to_bf16(down) == b;
            n++;
        }
    }
    CHECK(mid, "f32_to_bf16: the midpoint of each of %d neighbouring pairs goes to the even pattern", n);
    CHECK(above && below, "f32_to_bf16: one float step above a midpoint rounds away, one below rounds back");
    uint64_t x = 0x9e3779b97f4a7c15ull;
    int agree = 1, tried = 0;
    for (int i = 0; i < (1 << 22); i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const float f = float_of((uint32_t)(x >> 32));
        if (!isfinite(f)) continue;
        agree &= f32_to_bf16(f) == ref_bf16(f);
        tried++;
    }
    CHECK(agree, "f32_to_bf16 = rounding by distance on %d random finite floats", tried);
    CHECK(f32_to_bf16(FLT_MAX) == 0x7f80u && f32_to_bf16(-FLT_MAX) == 0xff80u,
          "FLT_MAX rounds to +inf (beyond the largest bf16 by more than half a step), -FLT_MAX to -inf");
    CHECK(f32_to_bf16(0.0f) == 0x0000u && f32_to_bf16(-0.0f) == 0x8000u && f32_to_bf16(INFINITY) == 0x7f80u &&
              f32_to_bf16(-INFINITY) == 0xff80u,
          "+0, -0, +inf and -inf are kept");
}

static void test_nan(void) {
    const uint32_t nans[] = {0x7fc00000u, 0x7f800001u, 0x7fffffffu, 0x7f80ffffu, 0xffc00000u, 0xff800001u, 0xffffffffu};
    int quiet = 1;
    for (size_t i = 0; i < sizeof(nans) / sizeof(nans[0]); i++) {
        const uint16_t b = f32_to_bf16(float_of(nans[i]));
        quiet &= isnan(bf16_to_f32(b)) && (b & 0x40u) && (b >> 15) == (nans[i] >> 31);
    }
    CHECK(quiet, "every NaN class (quiet, signalling, all bits set, both signs) stays a quiet NaN of its sign");
    const uint32_t u = 0x7fffffffu;
    const uint16_t naive = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    CHECK(!isnan(bf16_to_f32(naive)), "control: rounding 0x7fffffff without the NaN branch gives a number (0x%04x)",
          naive);
}

static double gelu_d(double x) { return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }

static void test_gelu(void) {
    double worst = 0.0, worst_grad = 0.0, erf_gap = 0.0;
    for (int i = -10000; i <= 10000; i++) {
        const float x = (float)i / 1000.0f;
        worst = worst_err(worst, fabs(gelu_tanhf(x) - gelu_d(x)) / (1.0 + fabs(x)));
        const double h = 1e-4, fd = (gelu_d(x + h) - gelu_d(x - h)) / (2 * h);
        worst_grad = worst_err(worst_grad, fabs(gelu_tanh_gradf(x) - fd));
        erf_gap = fmax(erf_gap, fabs(gelu_tanhf(x) - 0.5 * x * (1.0 + erf(x / sqrt(2.0)))));
    }
    CHECK(worst <= 2e-6, "gelu_tanhf = the tanh formula in double on [-10, 10]: %.2e <= 2e-6 (1 + |x|)", worst);
    CHECK(worst_grad <= 1e-5, "gelu_tanh_gradf = a central difference of the formula: %.2e <= 1e-5", worst_grad);
    CHECK(erf_gap > 1e-4, "control: the exact (erf) GELU is %.2e away, beyond the tolerance", erf_gap);
}

int main(void) {
    test_widen();
    test_round();
    test_nan();
    test_gelu();
    return test_finish();
}
