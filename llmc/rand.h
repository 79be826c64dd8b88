/*
 * llmc/rand.h: random numbers that match PyTorch's CPU generator bit for bit (up to libm).
 *
 * Defines:
 *   Mt19937           the 32-bit Mersenne Twister with PyTorch's state layout (2520 bytes; the
 *                     raw bytes go into llm.c-format state files, doc/formats.md "Optimizer/DataLoader state")
 *   mt_seed, mt_u32   seeding and one tempered 32-bit draw
 *   TorchGenerator    Mt19937 plus the cached second Box-Muller sample that torch keeps in its
 *                     generator for small tensors
 *   torch_normal_     fill n floats like `tensor.normal_(mean, std, generator=g)` in torch
 *   perm_identity, perm_shuffle
 *                     the data loader's Fisher-Yates permutation (llm.c's shuffle order)
 *   xorshift_u32      llm.c's xorshift* step: the trainers' sampling RNG and the GPU trainer's
 *                     stochastic-rounding seeds (rng_state in state files)
 *   sample_softmax    a token from softmax(logits) at temperature 1 with that RNG
 *
 * Why: the C trainer, the CUDA trainer and train_gpt2.py must start from the same weights so
 * that their losses and gradients can be compared directly (doc/formats.md "Random init and RNG order"). The mt19937
 * stream and the n < 16 path match torch exactly. For n >= 16, torch's vectorized kernel (the
 * avx_mathfun log/sincos in Debian's torch 1.13) differs from glibc's logf/sinf/cosf by up to ~20
 * ulps, and the compiler flags can move a value by 1 ulp; so C-vs-PyTorch init is compared to a
 * tolerance (test/test_rand.py, test/test_gpt2_cpu.c), and C-vs-C is bit-exact only between builds
 * with the same flags. The 1e-12 inside the logs is llm.c's guard (doc/formats.md "Random init and RNG order"); it changes
 * nothing measurable.
 */
#ifndef LLMC_RAND_H
#define LLMC_RAND_H

#include <math.h>
#include <stdint.h>

#define MT_N 624
#define MT_M 397

/* Field order and widths are a file format: do not reorder. */
typedef struct {
    uint64_t seed;
    int32_t left;        /* draws left before the next twist (torch semantics: starts at 1) */
    uint32_t next;       /* index of the next state word to temper */
    uint32_t state[MT_N];
    uint32_t matrix[2];  /* {0, 0x9908b0df}: the twist's conditional xor */
} Mt19937;

#ifdef __cplusplus
static_assert(sizeof(Mt19937) == 2520, "Mt19937 must be 2520 bytes (state-file format)");
#else
_Static_assert(sizeof(Mt19937) == 2520, "Mt19937 must be 2520 bytes (state-file format)");
#endif

static inline void mt_seed(Mt19937 *mt, uint32_t seed) {
    mt->seed = seed;
    mt->left = 1;
    mt->next = 0;
    mt->matrix[0] = 0u;
    mt->matrix[1] = 0x9908b0dfu;
    mt->state[0] = seed;
    for (uint32_t j = 1; j < MT_N; j++) {
        uint32_t prev = mt->state[j - 1];
        mt->state[j] = 1812433253u * (prev ^ (prev >> 30)) + j;
    }
}

/* Whether a generator read from a file is one mt_seed and mt_u32 can produce: freshly seeded
 * (left 1, next 0), or between twists with left + next = 625, and the twist's constants intact.
 * Anything else would index state[] out of bounds (a state file is checked with this). */
static inline int mt_state_valid(const Mt19937 *mt) {
    if (mt->matrix[0] != 0u || mt->matrix[1] != 0x9908b0dfu) return 0;
    if (mt->left == 1 && mt->next == 0) return 1;
    return mt->left >= 1 && mt->next >= 1 && mt->next <= MT_N && (int64_t)mt->left + mt->next == MT_N + 1;
}

/* Regenerates all 624 words (the "twist"). */
static inline void mt_twist(Mt19937 *mt) {
    uint32_t *s = mt->state;
    for (int k = 0; k < MT_N; k++) {
        uint32_t y = (s[k] & 0x80000000u) | (s[(k + 1) % MT_N] & 0x7fffffffu);
        s[k] = s[(k + MT_M) % MT_N] ^ (y >> 1) ^ mt->matrix[y & 1u];
    }
    mt->left = MT_N;
    mt->next = 0;
}

static inline uint32_t mt_u32(Mt19937 *mt) {
    if (--mt->left <= 0) mt_twist(mt);
    uint32_t y = mt->state[mt->next++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

/* torch's uniform_real_distribution<float>(0, 1): 24 random bits. */
static inline float mt_uniform_f32(Mt19937 *mt) {
    return (float)(mt_u32(mt) & ((1u << 24) - 1u)) * (1.0f / 16777216.0f);
}

/* torch's uniform_real_distribution<double>(0, 1): 53 of the bits of (first << 32 | second). */
static inline double mt_uniform_f64(Mt19937 *mt) {
    uint64_t hi = mt_u32(mt);
    uint64_t lo = mt_u32(mt);
    uint64_t x = (hi << 32) | lo;
    return (double)(x & ((1ull << 53) - 1ull)) * (1.0 / 9007199254740992.0);
}

typedef struct {
    Mt19937 mt;
    int has_next_normal;  /* torch caches the sin() half of a double Box-Muller pair */
    double next_normal;
} TorchGenerator;

static inline void torch_generator_seed(TorchGenerator *g, uint32_t seed) {
    mt_seed(&g->mt, seed);
    g->has_next_normal = 0;
    g->next_normal = 0.0;
}

/* Box-Muller on one block of 16 uniforms: slots t and t+8 form a pair (torch's normal_fill_16). */
static inline void normal_block16_(float *x, float mean, float std) {
    for (int t = 0; t < 8; t++) {
        float a = 1.0f - x[t];  /* (0, 1] so the log is finite */
        float b = x[t + 8];
        float r = sqrtf(-2.0f * logf(a + 1e-12f));
        float theta = (float)(2.0 * M_PI * (double)b);
        x[t] = r * cosf(theta) * std + mean;
        x[t + 8] = r * sinf(theta) * std + mean;
    }
}

/*
 * tensor.normal_(mean, std) for a contiguous float32 tensor of n elements, as torch's CPU kernel:
 * n >= 16: n float uniforms, transformed in blocks of 16; a ragged tail redraws 16 fresh
 * uniforms into the last 16 slots and transforms them again.
 * n < 16: one double Box-Muller pair per two outputs; the unused sin() half stays cached in the
 * generator and is consumed by the next small call, exactly as torch does.
 */
static inline void torch_normal_(float *x, size_t n, float mean, float std, TorchGenerator *g) {
    if (n >= 16) {
        for (size_t i = 0; i < n; i++) x[i] = mt_uniform_f32(&g->mt);
        for (size_t i = 0; i + 16 <= n; i += 16) normal_block16_(x + i, mean, std);
        if (n % 16 != 0) {
            float *tail = x + n - 16;
            for (int i = 0; i < 16; i++) tail[i] = mt_uniform_f32(&g->mt);
            normal_block16_(tail, mean, std);
        }
        return;
    }
    for (size_t i = 0; i < n; i++) {
        double z;
        if (g->has_next_normal) {
            z = g->next_normal;
            g->has_next_normal = 0;
        } else {
            double u1 = mt_uniform_f64(&g->mt);
            double u2 = mt_uniform_f64(&g->mt);
            double r = sqrt(-2.0 * log(1.0 - u2 + 1e-12));
            double theta = 2.0 * M_PI * u1;
            g->next_normal = r * sin(theta);
            g->has_next_normal = 1;
            z = r * cos(theta);
        }
        x[i] = (float)(z * (double)std + (double)mean);
    }
}

/* ----------------------------------------------------------------------------------------------
 * Permutations for the data loader (doc/formats.md "DataLoader semantics"): Fisher-Yates from the end,
 * j = u32 mod (i+1). perm_shuffle permutes whatever order `p` already holds. */
static inline void perm_identity(int32_t *p, int64_t n) {
    for (int64_t i = 0; i < n; i++) p[i] = (int32_t)i;
}

static inline void perm_shuffle(int32_t *p, int64_t n, Mt19937 *mt) {
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(mt_u32(mt) % (uint32_t)(i + 1));
        int32_t tmp = p[i];
        p[i] = p[j];
        p[j] = tmp;
    }
}

/* llm.c's xorshift* (64-bit state, high 32 bits of the product). */
static inline uint32_t xorshift_u32(uint64_t *state) {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return (uint32_t)((*state * 0x2545F4914F6CDD1Dull) >> 32);
}

/* The sampling RNG's seed in both trainers, as llm.c's (doc/formats.md "The trainer command line"). */
#define SAMPLE_RNG_SEED 1337ull

/* One draw from softmax(logits[0..V-1]): a uniform coin of 24 bits against the unnormalized CDF,
 * summed in double with the max subtracted (the same token on every platform for one state). */
static inline int sample_softmax(const float *logits, int V, uint64_t *rng) {
    float mx = -INFINITY;
    for (int v = 0; v < V; v++) mx = logits[v] > mx ? logits[v] : mx;
    double sum = 0.0;
    for (int v = 0; v < V; v++) sum += exp((double)logits[v] - mx);
    const double coin = (xorshift_u32(rng) >> 8) / 16777216.0 * sum;
    double cdf = 0.0;
    for (int v = 0; v < V; v++) {
        cdf += exp((double)logits[v] - mx);
        if (coin < cdf) return v;
    }
    return V - 1;
}

#endif /* LLMC_RAND_H */
