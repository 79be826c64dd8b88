/*
 * test/test_cuda_host.c: the CUDA trainer's host-side decisions in plain C (the headers of llmc/cuda/,
 * llmc/gpu/act_plan.h, the model from the command line), on the CPU. The attention path of each
 * layer (llmc/attention/paths.h) is test/test_paths.c's.
 *
 *   - the cuBLASLt algorithm cache's table: hit, miss, every key field, a full table;
 *   - activation plan: per-layer blocks (sum of h_l, max h_l), alignment, recompute, 64-bit sizes
 *     where B h T T and 3 B T C pass 2^31;
 *   - ZeRO-0/1 shard plans: every parameter updated by exactly one rank, llm.c's state order,
 *     the divisibility error;
 *   - the MFU table (H100, H200) and FLOPs per token;
 *   - encoder backward buckets;
 *   - stochastic rounding to bf16 (unbiased, with a biased negative control);
 *   - the bf16 checkpoint writer against the shared reader;
 *   - the local rank from the launcher's variables;
 *   - the layer kinds (S-D, linear, -ln 0): buffer sizes per kind, FLOPs, the model built from the
 *     command line (options, table, checkpoint rules) and its init, which must equal the CPU
 *     trainer's bit for bit, ZeRO shards of the S-D tensors, v105 flags.
 * Exact checks unless a tolerance is stated next to it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../llmc/config.h"
#include "../llmc/attention/paths.h"
#include "../llmc/cuda/lt_algo.h"
#include "../llmc/gpu/act_plan.h"
#include "../llmc/cuda/zero_plan.h"
#include "../llmc/cuda/mfu.h"
#include "../llmc/cuda/encoder_buckets.h"
#include "../llmc/cuda/adamw.h"
#include "../llmc/cuda/local_rank.h"
#include "../llmc/model_init.h"
#include "../llmc/param_layout.h"
#include "../llmc/layer_table.h"
#include "../prism/rules.h"
#include "harness.h"
#include "../llmc/checkpoint.h"
#include "../llmc/cpu/gpt2_cpu.h"
#include "../kinds/registry_cpu.h"

static GPT2Config model_of(const char *desc, const char *schedule) {
    GPT2Config c;
    char msg[512];
    if (!config_from_descriptor(desc, &c, msg, sizeof(msg))) llmc_die("%s", msg);
    if (schedule != NULL) {
        LayerTable s;
        if (!layer_table_parse(schedule, "test", &c, &s)) llmc_die("%s", s.error);
        layer_table_apply(&s, &c);
    }
    return c;
}


/* The cuBLASLt algorithm cache's table (llmc/cuda/matmul.cu keeps the algorithms by slot). */
static LtAlgoKey lt_test_key(int64_t m, int64_t n, int64_t k) {
    LtAlgoKey key;
    memset(&key, 0, sizeof(key));
    key.m = m;
    key.n = n;
    key.k = k;
    key.lda = k;
    key.ldb = k;
    key.ldd = m;
    key.trans_a = 1;
    key.epilogue = 2;
    key.has_bias = 1;
    key.dtype = 14;
    key.compute_type = 68;
    key.align_a = key.align_b = key.align_d = key.align_bias = 256;
    key.workspace = 32 << 20;
    return key;
}

static void test_lt_algo_cache(void) {
    LtAlgoTable *t = (LtAlgoTable *)xcalloc(1, sizeof(LtAlgoTable));
    const LtAlgoKey a = lt_test_key(2304, 4096, 768), b = lt_test_key(768, 4096, 768);
    CHECK(lt_algo_find(t, &a) == -1, "an empty table misses");
    const int sa = lt_algo_insert(t, &a), sb = lt_algo_insert(t, &b);
    CHECK(sa == 0 && sb == 1, "inserts take slots 0 and 1 (got %d %d)", sa, sb);
    LtAlgoKey a2 = lt_test_key(2304, 4096, 768);
    CHECK(lt_algo_find(t, &a2) == 0 && lt_algo_find(t, &b) == 1, "an equal key (built anew) hits its own slot");
    /* every field takes part: a key differing from a in any one field misses */
    const int nfields = (int)(sizeof(LtAlgoKey) / sizeof(int64_t));
    int distinct = 1;
    for (int f = 0; f < nfields; f++) {
        int64_t v[sizeof(LtAlgoKey) / sizeof(int64_t)];
        memcpy(v, &a, sizeof(a));
        v[f] ^= 8;
        LtAlgoKey x;
        memcpy(&x, v, sizeof(x));
        distinct &= lt_algo_find(t, &x) == -1;
    }
    CHECK(distinct, "each of the %d key fields separates problems (alignment, epilogue, ld, ...)", nfields);
    /* no padding (memcmp compares keys): the sizes of the declared fields add up to the key's size; a
     * field added to the struct but not here fails this too, so that it is reviewed */
#define KEY_FIELD(f) sizeof(((const LtAlgoKey *)0)->f)
    const size_t declared = KEY_FIELD(m) + KEY_FIELD(n) + KEY_FIELD(k) + KEY_FIELD(lda) + KEY_FIELD(ldb) +
                            KEY_FIELD(ldd) + KEY_FIELD(ld_aux) + KEY_FIELD(trans_a) + KEY_FIELD(trans_b) +
                            KEY_FIELD(epilogue) + KEY_FIELD(has_bias) + KEY_FIELD(has_aux) + KEY_FIELD(dtype) +
                            KEY_FIELD(compute_type) + KEY_FIELD(align_a) + KEY_FIELD(align_b) + KEY_FIELD(align_d) +
                            KEY_FIELD(align_bias) + KEY_FIELD(align_aux) + KEY_FIELD(workspace);
#undef KEY_FIELD
    CHECK(declared == sizeof(LtAlgoKey), "the key has no padding: its 20 fields fill its %zu bytes (memcmp "
          "compares it)", sizeof(LtAlgoKey));
    for (int i = 2; i < LT_ALGO_SLOTS; i++) {
        const LtAlgoKey k = lt_test_key(64 + i, 1024, 768);
        if (lt_algo_insert(t, &k) != i) break;
    }
    const LtAlgoKey extra = lt_test_key(9999, 1024, 768), last = lt_test_key(64 + LT_ALGO_SLOTS - 1, 1024, 768);
    CHECK(t->count == LT_ALGO_SLOTS && lt_algo_insert(t, &extra) == -1 && t->count == LT_ALGO_SLOTS,
          "a full table (%d slots) refuses a new problem and stays as it was", LT_ALGO_SLOTS);
    CHECK(lt_algo_find(t, &extra) == -1 && lt_algo_find(t, &a) == 0 && lt_algo_find(t, &last) == LT_ALGO_SLOTS - 1,
          "full: the refused problem misses (its heuristic runs each call), the cached ones still hit");
    free(t);
}

/* ---------------------------------------------------------------------------------------------- */
static int aligned(size_t x) { return x % ACT_ALIGN == 0; }

static void test_act_plan(void) {
    const int B = 4, T = 64;
    const GPT2Config uni = model_of("d12", NULL), prism = model_of("d12", "3*2 6*2 12*8");
    AttPath own[LLMC_MAX_LAYERS], cudnn[LLMC_MAX_LAYERS];
    for (int l = 0; l < LLMC_MAX_LAYERS; l++) {
        own[l] = ATT_PATH_OWN;
        cudnn[l] = ATT_PATH_CUDNN;
    }
    ActPlan pu, pp, pc;
    act_plan_init(&pu, &uni, B, T, 0, own);
    act_plan_init(&pp, &prism, B, T, 0, own);
    act_plan_init(&pc, &prism, B, T, 0, cudnn);
    const size_t N = (size_t)B * T, TT = (size_t)T * T;
    CHECK(pu.n[ACT_ATT] == (size_t)B * 144 * TT, "uniform own-path att: B x (12 x 12 heads) x T^2 = %zu", pu.n[ACT_ATT]);
    CHECK(pp.n[ACT_ATT] == (size_t)B * 114 * TT, "Prism own-path att: B x (3+3+6+6+8 x 12 = 114 heads) x T^2 = %zu",
          pp.n[ACT_ATT]);
    CHECK(pp.n[ACT_DATT] == (size_t)B * 12 * TT, "datt scratch sized by max h_l = 12");
    CHECK(pc.n[ACT_ATT] == 0 && pc.n[ACT_DATT] == 0 && pc.n[ACT_ATT_SCRATCH] == 0, "cuDNN everywhere: no att buffers");
    CHECK(pc.n[ACT_STATS] == (size_t)B * 114 * T, "cuDNN stats: B x sum h_l x T = %zu", pc.n[ACT_STATS]);
    CHECK(pp.att_off[2] == 2 * (size_t)B * 3 * TT && pp.att_off[4] == pp.att_off[2] + 2 * (size_t)B * 6 * TT,
          "per-layer att prefix offsets follow h_l");
    CHECK(pp.qkv_off[12] == 12 * N * 3 * 768 && pp.n[ACT_QKV] == pu.n[ACT_QKV], "qkv blocks: Prism = uniform (A = C)");
    int ok = 1;
    for (int t = 0; t < NUM_ACTS; t++) ok &= aligned(pp.off[t]);
    CHECK(ok, "every tensor starts on a %d-element boundary", ACT_ALIGN);
    /* explicit odd head sizes: the per-layer blocks stay aligned */
    const GPT2Config odd = model_of("d12", "3x12 6x20 12*10");
    ActPlan po;
    AttPath mixed[LLMC_MAX_LAYERS];
    for (int l = 0; l < LLMC_MAX_LAYERS; l++) mixed[l] = l < 2 ? ATT_PATH_OWN : ATT_PATH_CUDNN;
    act_plan_init(&po, &odd, 3, 7, 0, mixed);
    ok = 1;
    for (int l = 0; l <= 12; l++) ok &= aligned(po.qkv_off[l]) && aligned(po.atty_off[l]) && aligned(po.att_off[l]);
    CHECK(ok && po.qkv_off[1] >= (size_t)21 * 3 * 36, "odd widths (A = 36, 120): per-layer blocks aligned, B*T = 21");
    CHECK(po.A_max == 768 && po.A_own_max == 120 && po.n[ACT_ATT_SCRATCH] == 7 * (size_t)21 * 120,
          "own-path scratch sized by the widest own layer (A 120), %zu", po.n[ACT_ATT_SCRATCH]);
    CHECK(po.n[ACT_DBIG] == (size_t)21 * 4 * 768 && po.n[ACT_DSMALL] == (size_t)21 * 768, "backward scratch widths");
    /* recompute */
    ActPlan r1, r2;
    act_plan_init(&r1, &uni, B, T, 1, own);
    act_plan_init(&r2, &uni, B, T, 2, own);
    CHECK(r1.n[ACT_FCH_GELU] == N * 4 * 768 && pu.n[ACT_FCH_GELU] == 12 * N * 4 * 768 && r1.n[ACT_LN1] == pu.n[ACT_LN1],
          "-r 1: one fch_gelu buffer for all layers");
    CHECK(r2.n[ACT_LN1] == N * 768 && r2.n[ACT_LN2] == N * 768 && r2.n[ACT_FCH_GELU] == N * 4 * 768,
          "-r 2: one ln1, ln2 and fch_gelu buffer");
    CHECK(act_plan_bytes(&r2) < act_plan_bytes(&r1) && act_plan_bytes(&r1) < act_plan_bytes(&pu), "recompute saves memory");
    /* 64-bit sizes */
    const GPT2Config narrow = model_of("d12", "48*12"); /* 48 heads of 16 */
    ActPlan big;
    act_plan_init(&big, &narrow, 64, 2048, 0, own);
    const unsigned long long blk = 64ull * 48ull * 2048ull * 2048ull;
    CHECK(blk > (1ull << 32) && big.n[ACT_DATT] == blk && big.att_off[1] == act_round_up(blk) &&
              big.n[ACT_ATT] == 12 * act_round_up(blk),
          "B h T T = %llu > 2^32 held in size_t (per layer and summed: %zu)", blk, big.n[ACT_ATT]);
    ActPlan wide;
    act_plan_init(&wide, &uni, 512, 2048, 0, cudnn);
    const unsigned long long qkv = 3ull * 512 * 2048 * 768;
    CHECK(qkv > (1ull << 31) && wide.qkv_off[1] == act_round_up(qkv), "3 B T C = %llu > 2^31 per layer", qkv);
}

/* ---------------------------------------------------------------------------------------------- */
static void check_shards(const GPT2Config *c, int zero, int nproc, const char *what) {
    ParamLayout pl;
    param_layout_init(&pl, c);
    unsigned char *hits = (unsigned char *)xcalloc(pl.total, 1);
    int ok = 1, order = 1;
    size_t total = 0;
    char err[256];
    for (int r = 0; r < nproc; r++) {
        ShardPlan *s = (ShardPlan *)xmalloc(sizeof(ShardPlan));
        ok &= shard_plan_init(s, &pl, c, zero, nproc, r, err, sizeof(err));
        size_t next = 0;
        for (int i = 0; i < s->nseg; i++) {
            const ShardSeg *g = &s->seg[i];
            order &= g->shard_off == next && (i == 0 || g->slot > s->seg[i - 1].slot ||
                                              (g->slot == s->seg[i - 1].slot && g->layer > s->seg[i - 1].layer));
            next += g->count;
            order &= g->global_off >= g->block_off && g->global_off + g->count <= g->block_off + g->block_size;
            for (size_t k = 0; k < g->count; k++) hits[g->global_off + k]++;
        }
        order &= next == s->shard_total;
        total += s->shard_total;
        free(s);
    }
    int once = 1;
    const int expect = zero == 1 ? 1 : nproc; /* ZeRO-0: every rank updates everything */
    for (size_t i = 0; i < pl.total; i++) once &= hits[i] == expect;
    CHECK(ok && order && once && total == (zero == 1 ? pl.total : pl.total * nproc),
          "%s: ZeRO-%d over %d ranks: each parameter updated by %s, segments in (slot, layer) order, "
          "shards back to back", what, zero, nproc, zero == 1 ? "exactly one rank" : "every rank");
    free(hits);
}

static void test_shards(void) {
    const GPT2Config uni = model_of("d12", NULL), prism = model_of("d12", "3*2 6*2 12*8");
    const GPT2Config expl = model_of("tiny", "1x96 2x48 4x16*2"); /* per-layer sizes differ */
    check_shards(&uni, 0, 1, "d12");
    check_shards(&uni, 1, 8, "d12");
    check_shards(&prism, 1, 8, "d12 Prism");
    check_shards(&expl, 1, 4, "tiny, explicit head sizes");
    check_shards(&expl, 0, 2, "tiny, explicit head sizes");
    ParamLayout pl;
    param_layout_init(&pl, &uni);
    ShardPlan *s = (ShardPlan *)xmalloc(sizeof(ShardPlan));
    char err[256];
    int ok = shard_plan_init(s, &pl, &uni, 0, 1, 0, err, sizeof(err));
    CHECK(ok && s->shard_total == 124475904u && s->seg[0].slot == P_WTE && s->seg[s->nseg - 1].slot == P_LNFB &&
              s->nseg == 4 + 12 * 12,
          "d12 ZeRO-0: 124475904 values, wte first, lnfb last, 148 segments");
    ok = shard_plan_init(s, &pl, &uni, 1, 8, 3, err, sizeof(err));
    CHECK(ok && s->shard_total == 124475904u / 8 && s->seg[0].global_off == 3 * (50304u * 768u / 8),
          "d12 ZeRO-1 rank 3 of 8: a 1/8 slice of every tensor, starting at 3/8 of wte");
    const GPT2Config tiny = model_of("tiny", NULL);
    param_layout_init(&pl, &tiny);
    ok = !shard_plan_init(s, &pl, &tiny, 1, 3, 0, err, sizeof(err)) && strstr(err, "not divisible by 3") &&
         strstr(err, "-z 1");
    CHECK(ok, "ZeRO-1 with an indivisible tensor: %s", err);
    CHECK(shard_plan_init(s, &pl, &tiny, 0, 3, 2, err, sizeof(err)), "the same under ZeRO-0 is fine");
    free(s);
}

/* ---------------------------------------------------------------------------------------------- */
static void test_mfu(void) {
    const double h100 = 756.0 * (528.0 / 456.0) * (1830.0 / 1620.0);
    /* the table rounds to 0.1 TFLOP/s */
    CHECK(fabs(gpu_peak_bf16_tflops("NVIDIA H100 80GB HBM3") - h100) < 0.1, "H100 SXM: %.1f (llm.c's scaling)", h100);
    CHECK(gpu_peak_bf16_tflops("NVIDIA H200") == 988.8, "H200 in the table: 988.8 (llm.c printed -100%%)");
    CHECK(gpu_peak_bf16_tflops("NVIDIA H200 NVL") == 835.5, "H200 NVL: the longer prefix wins");
    CHECK(gpu_peak_bf16_tflops("NVIDIA H100 PCIe") == 756.0, "H100 PCIe");
    CHECK(gpu_peak_bf16_tflops("NVIDIA A100-SXM4-80GB") == 312.0 && gpu_peak_bf16_tflops("NVIDIA A100 80GB PCIe") == 312.0,
          "A100 variants");
    CHECK(gpu_peak_bf16_tflops("NVIDIA A10") == 125.0 && gpu_peak_bf16_tflops("NVIDIA A10G") < 0,
          "prefixes end at a word boundary (A10 is not A100, A10G unknown)");
    CHECK(gpu_peak_bf16_tflops("Tesla T4") < 0, "unknown GPU: -1");
    /* the scaled entries against llm.c's formula, and the longest-prefix rule among similar names */
    const double r3090 = 80.0 * (328.0 / 336.0) * (1695.0 / 1860.0), r4080 = 165.2 * (304.0 / 512.0) * (2505.0 / 2520.0);
    CHECK(fabs(gpu_peak_bf16_tflops("NVIDIA GeForce RTX 3090") - r3090) < 0.05 &&
              gpu_peak_bf16_tflops("NVIDIA GeForce RTX 3090 Ti") == 80.0,
          "RTX 3090 %.2f (328 TCs, 1695 MHz), 3090 Ti 80.0", r3090);
    CHECK(fabs(gpu_peak_bf16_tflops("NVIDIA GeForce RTX 4080") - r4080) < 0.05 &&
              gpu_peak_bf16_tflops("NVIDIA GeForce RTX 4080 SUPER") == 104.5 &&
              gpu_peak_bf16_tflops("NVIDIA GeForce RTX 4070 Ti SUPER") == 88.2,
          "RTX 4080 %.2f, its SUPER and the 4070 Ti SUPER their own", r4080);
    CHECK(gpu_peak_bf16_tflops("NVIDIA L40") == 181.0 && gpu_peak_bf16_tflops("NVIDIA L40S") == 366.0 &&
              gpu_peak_bf16_tflops("NVIDIA RTX 6000 Ada Generation") == 364.2,
          "L40, L40S, RTX 6000 Ada (its device name ends in Generation)");
    CHECK(gpu_peak_bf16_tflops("NVIDIA B200") == 2250.0 && gpu_peak_bf16_tflops("NVIDIA GB200") == 2500.0 &&
              gpu_peak_bf16_tflops("NVIDIA GeForce RTX 5090") == 209.5,
          "Blackwell: B200, GB200, RTX 5090");
    /* every scaled entry matches its comment's TCs and MHz to the table's 0.1 */
    static const struct { const char *name; double ref, tc, mhz, ref_tc, ref_mhz; } SCALED[] = {
        {"NVIDIA RTX A2000", 80, 104, 1200, 336, 1860},           {"NVIDIA RTX A4000", 80, 192, 1560, 336, 1860},
        {"NVIDIA RTX A4500", 80, 224, 1650, 336, 1860},           {"NVIDIA RTX A5000", 80, 256, 1695, 336, 1860},
        {"NVIDIA RTX A5500", 80, 320, 1770, 336, 1860},           {"NVIDIA RTX A6000", 80, 336, 1800, 336, 1860},
        {"NVIDIA GeForce RTX 3060", 80, 112, 1777, 336, 1860},    {"NVIDIA GeForce RTX 3060 Ti", 80, 152, 1665, 336, 1860},
        {"NVIDIA GeForce RTX 3070", 80, 184, 1725, 336, 1860},    {"NVIDIA GeForce RTX 3070 Ti", 80, 192, 1770, 336, 1860},
        {"NVIDIA GeForce RTX 3080", 80, 272, 1710, 336, 1860},    {"NVIDIA GeForce RTX 3080 Ti", 80, 320, 1665, 336, 1860},
        {"NVIDIA GeForce RTX 4060", 165.2, 96, 2460, 512, 2520},  {"NVIDIA GeForce RTX 4060 Ti", 165.2, 136, 2535, 512, 2520},
        {"NVIDIA GeForce RTX 4070", 165.2, 184, 2475, 512, 2520}, {"NVIDIA GeForce RTX 4070 SUPER", 165.2, 224, 2475, 512, 2520},
        {"NVIDIA GeForce RTX 4070 Ti", 165.2, 240, 2610, 512, 2520},
    };
    int scaled_ok = 1;
    for (size_t i = 0; i < sizeof(SCALED) / sizeof(SCALED[0]); i++) {
        const double want = SCALED[i].ref * SCALED[i].tc / SCALED[i].ref_tc * SCALED[i].mhz / SCALED[i].ref_mhz;
        if (fabs(gpu_peak_bf16_tflops(SCALED[i].name) - want) > 0.05) {
            printf("  %s: table %.1f, formula %.2f\n", SCALED[i].name, gpu_peak_bf16_tflops(SCALED[i].name), want);
            scaled_ok = 0;
        }
    }
    CHECK(scaled_ok, "the %zu scaled Ampere/Ada entries equal llm.c's formula to 0.05", sizeof(SCALED) / sizeof(SCALED[0]));
    const GPT2Config d12 = model_of("d12", NULL), prism = model_of("d12", "3*2 6*2 12*8");
    const double f = train_flops_per_token(&d12, 124475904u, 1024);
    CHECK(f == 6.0 * 124475904.0 + 6.0 * 12 * 768 * 1024, "d12 FLOPs/token = 6N + 6LCT = %.4g", f);
    CHECK(train_flops_per_token(&prism, 124475904u, 1024) == f, "Prism: the same FLOPs per token");
    const double mfu = mfu_estimate(f, 524288.0, 0.5, 988.8);
    CHECK(fabs(mfu - f * 524288.0 / 0.5 / 988.8e12) < 1e-12 && mfu_estimate(f, 1, 1, -1) == -1.0, "MFU = %.3f", mfu);
}

static void test_buckets(void) {
    enum { N = 4096, V = 300 };
    static int in[N], uniq[N], start[N + 1], pos[N], count[V];
    uint64_t st = 7;
    for (int i = 0; i < N; i++) in[i] = (int)(xorshift_u32(&st) % (i % 7 == 0 ? 3 : V));
    const int U = encoder_buckets(in, N, V, uniq, start, pos, count);
    int ok = start[0] == 0 && start[U] == N;
    static int seen[N];
    memset(seen, 0, sizeof(seen));
    for (int u = 0; u < U; u++) {
        ok &= u == 0 || uniq[u] > uniq[u - 1];
        ok &= start[u + 1] > start[u];
        for (int p = start[u]; p < start[u + 1]; p++) {
            ok &= in[pos[p]] == uniq[u];
            ok &= p == start[u] || pos[p] > pos[p - 1];
            seen[pos[p]]++;
        }
    }
    for (int i = 0; i < N; i++) ok &= seen[i] == 1;
    CHECK(ok && U <= V, "encoder buckets: %d distinct tokens, increasing ids, positions in order, each once", U);
}

/* ---------------------------------------------------------------------------------------------- */

static void test_stochastic_rounding(void) {
    /* exact bf16 values never move */
    int exact = 1;
    const float vals[] = {0.0f, 1.0f, -2.5f, 3.0e-20f, 65280.0f};
    for (int i = 0; i < 5; i++) {
        const float v = bf16_to_f32(f32_to_bf16(vals[i]));
        exact &= bf16_to_f32(sr_bf16_bits(v, 0)) == v && bf16_to_f32(sr_bf16_bits(v, 0xffffu)) == v;
    }
    CHECK(exact, "bf16-representable values are unchanged for any random bits");
    /* x = 1 + 0.3 ulp: the result is 1 or 1 + ulp, 1 + ulp with probability 0.3 */
    const float ulp = 1.0f / 128.0f;
    const float x = 1.0f + 0.3f * ulp, xn = -x;
    const int n = 200000;
    double sum = 0.0, sum_neg = 0.0, sum_trunc = 0.0;
    int neighbours = 1;
    for (int i = 0; i < n; i++) {
        const uint32_t r = sr_hash(1234u, (uint64_t)i);
        const float y = bf16_to_f32(sr_bf16_bits(x, r));
        neighbours &= y == 1.0f || y == 1.0f + ulp;
        sum += y;
        sum_neg += bf16_to_f32(sr_bf16_bits(xn, r));
        sum_trunc += bf16_to_f32(sr_bf16_bits(x, 0)); /* negative control: truncation is biased */
    }
    /* std of the mean: ulp sqrt(0.3 0.7 / n) = 8.0e-6; allow 5 sigma = 4.1e-5 */
    const double tol = 5.0 * ulp * sqrt(0.21 / n);
    CHECK(neighbours, "results are the two bf16 neighbours of x");
    CHECK(fabs(sum / n - x) < tol, "unbiased: mean %.7f vs x %.7f (tol %.1e)", sum / n, (double)x, tol);
    CHECK(fabs(sum_neg / n - xn) < tol, "unbiased for negative x: mean %.7f", sum_neg / n);
    CHECK(fabs(sum_trunc / n - x) > 10 * tol, "negative control: truncation misses by %.2e (> 10 tol)", fabs(sum_trunc / n - x));
    CHECK(bf16_to_f32(sr_bf16_bits(3.3895e38f, 0xffffu)) < INFINITY && isinf(bf16_to_f32(sr_bf16_bits(INFINITY, 5))) &&
              isnan(bf16_to_f32(sr_bf16_bits(NAN, 5))),
          "no overflow to inf; inf and NaN pass through");
    CHECK(sr_hash(1, 0) != sr_hash(1, 1) && sr_hash(1, 0) != sr_hash(2, 0), "hash depends on seed and index");
}

/* Writes random bf16 parameters of model c (values in [-scale/2, scale/2)) through
 * checkpoint_write_bf16, reads them back; returns 1 when every value came back bit for bit.
 * back: the config read from the header; h: the raw header ints. */
static int bf16_roundtrip(const char *path, const GPT2Config *c, float scale, uint64_t seed, GPT2Config *back,
                          int32_t h[256]) {
    ParamLayout pl;
    param_layout_init(&pl, c);
    uint16_t *w = (uint16_t *)xmalloc(pl.total * sizeof(uint16_t));
    for (size_t i = 0; i < pl.total; i++) w[i] = f32_to_bf16(((float)xorshift_u32(&seed) / 4294967296.0f - 0.5f) * scale);
    checkpoint_write_bf16(path, c, w);
    int is_bf16 = 0;
    float *f = checkpoint_load_fp32(path, back, &is_bf16);
    int same = is_bf16;
    for (size_t i = 0; i < pl.total; i++) same &= f32_to_bf16(f[i]) == w[i];
    FILE *fh = xfopen(path, "rb");
    xfread(h, 4, 256, fh, path, "header");
    xfclose(fh, path);
    free(w);
    free(f);
    return same;
}

static void test_bf16_checkpoint(void) {
    const char *path = "build/tmp_cuda_host_ckpt.bin";
    const GPT2Config cases[2] = {model_of("tiny", NULL), model_of("tiny", "1 2 4*2")};
    for (int k = 0; k < 2; k++) {
        GPT2Config back;
        int32_t h[256];
        const int same = bf16_roundtrip(path, &cases[k], 0.1f, 99, &back, h);
        CHECK(same && h[1] == (k == 0 ? 5 : 105) && back.layer[0].n_head == cases[k].layer[0].n_head,
              "bf16 checkpoint (%s): version %d, read back bit for bit", k == 0 ? "uniform" : "Prism", h[1]);
        CHECK(!file_exists("build/tmp_cuda_host_ckpt.bin.tmp"), "written through NAME.tmp and renamed");
    }
    remove(path);
}


/* ----------------------------------------------------------------------------------------------
 * Layer kinds: S-D (sd), linear (lin), S-D + linear (sdlin), -ln 0 */
static void test_kind_plan(void) {
    const int B = 3, T = 7; /* N = 21: odd sizes everywhere */
    const size_t N = (size_t)B * T, C = 64;
    const GPT2Config c = model_of("tiny", "2x24:sd 2x24:sdlin 4x8:lin 4x16"); /* A = 48, 48, 32, 64 */
    AttPath path[LLMC_MAX_LAYERS];
    char err[256];
    const AttnEnv h200 = {90, 1, 91900, 0};
    CHECK(attn_select_paths(&c, ATTN_REQ_AUTO, &h200, 1, path, err, sizeof(err)), "paths for the mixed table");
    ActPlan p;
    act_plan_init(&p, &c, B, T, 0, path);
    CHECK(p.n[ACT_PROJ_SCRATCH] == N * 2 * 48, "S-D scratch: B T x 2 A of the widest S-D layer = %zu", p.n[ACT_PROJ_SCRATCH]);
    CHECK(p.proj_state_off[1] - p.proj_state_off[0] == act_round_up(2 * 24 * 24) &&
              p.proj_state_off[2] - p.proj_state_off[1] == act_round_up(2 * 24 * 24) &&
              p.proj_state_off[2] == p.proj_state_off[4] && p.n[ACT_PROJ_STATE] == p.proj_state_off[4],
          "generators L: h d^2 per S-D layer (sd and sdlin), nothing for lin/mha");
    CHECK(p.n[ACT_PROJ_SCRATCH_F32] == 2 * 24 * 24, "dL scratch: max h d^2 = %zu", p.n[ACT_PROJ_SCRATCH_F32]);
    CHECK(p.n[ACT_MIX_SCRATCH] == lin_scratch_floats(N, 2, 24) && lin_scratch_floats(N, 2, 24) == 5 * N * 48 + 2 * N * 2,
          "linear scratch: the widest linear layer (sdlin 2x24): 5 N A + 2 N h = %zu", p.n[ACT_MIX_SCRATCH]);
    { /* one layer's views tile its scratch exactly: five B h T d blocks, then Z and dg (B h T each) */
        LinLayer L;
        float *base = (float *)xmalloc(lin_scratch_floats(N, 2, 24) * sizeof(float));
        const size_t n = N * 48, rows = N * 2;
        const int fits = lin_layer_init(&L, base, B, T, 2, 24, 1, 232448);
        int views = L.qf == base && L.kf == base + n && L.vf == base + 2 * n && L.dn == base + 3 * n &&
                    L.out == base + 4 * n && L.Z == base + 5 * n && L.dg == base + 5 * n + rows &&
                    L.dg + rows == base + lin_scratch_floats(N, 2, 24);
        CHECK(fits && views && L.c == powf(24.0f, -0.25f) && L.shape.CH > 0,
              "lin_layer_init: views tile lin_scratch_floats exactly, prescale d^-1/4, a scan shape");
        CHECK(!lin_layer_init(&L, base, B, T, 2, 24, 0, 1024) && L.c == 1.0f,
              "lin_layer_init: no scan shape in 1 KiB of shared memory; c = 1 without prescale");
        free(base);
    }
    CHECK(p.att_off[3] == 0 && p.att_off[4] == p.n[ACT_ATT] && p.stats_off[3] == act_round_up((size_t)B * 2 * T) &&
              p.n[ACT_STATS] == act_round_up((size_t)B * 2 * T) + act_round_up((size_t)B * 4 * T),
          "linear layers have no probabilities or softmax statistics (layer 0 sd d 24 and layer 3 on cuDNN)");
    CHECK(p.qkv_off[1] == act_round_up(N * 3 * 48) && p.qkv_off[4] - p.qkv_off[3] == act_round_up(N * 3 * 64),
          "qkv blocks are 3 A wide for every kind (S-D: U | U L^T | V)");
    int ok = 1;
    for (int t = 0; t < NUM_ACTS; t++) ok &= p.off[t] % ACT_ALIGN == 0;
    for (int l = 0; l <= 4; l++) ok &= p.proj_state_off[l] % ACT_ALIGN == 0;
    CHECK(ok, "new tensors aligned");
    CHECK(strcmp(ACT_NAMES[ACT_PROJ_SCRATCH], "proj_scratch") == 0 && strcmp(ACT_NAMES[ACT_MIX_SCRATCH], "mix_scratch") == 0 &&
              act_is_f32(ACT_PROJ_STATE) && act_is_f32(ACT_MIX_SCRATCH) && !act_is_f32(ACT_PROJ_SCRATCH),
          "names and arenas of the new tensors");
    /* an evaluation shape's tensors end before the allocation plan's loss accumulator, which
     * gpt2gpu_forward addresses through the allocation plan for every shape */
    ActPlan small;
    act_plan_init(&small, &c, 1, 2, 0, path);
    ok = ACT_LOSSES == NUM_ACTS - 1;
    for (int t = ACT_FIRST_F32; t < ACT_LOSSES; t++) ok &= small.off[t] + small.n[t] <= p.off[ACT_LOSSES];
    CHECK(ok, "fp32 tensors of a (1, 2) forward end before the (3, 7) plan's losses at %zu", p.off[ACT_LOSSES]);
    /* -ln 0 */
    GPT2Config noln = c;
    noln.use_ln = 0;
    ActPlan q;
    act_plan_init(&q, &noln, B, T, 0, path);
    CHECK(q.n[ACT_LN1] == 0 && q.n[ACT_LN2] == 0 && q.n[ACT_LN1_MEAN] == 0 && q.n[ACT_LN2_RSTD] == 0 &&
              q.n[ACT_LNF_MEAN] == N && q.n[ACT_LNF] == N * C,
          "-ln 0: no ln1/ln2 tensors or statistics; ln_f kept");
    CHECK(act_plan_bytes(&q) < act_plan_bytes(&p), "-ln 0 needs less memory (%zu < %zu bytes)", act_plan_bytes(&q),
          act_plan_bytes(&p));
    act_plan_init(&q, &noln, B, T, 2, path);
    CHECK(q.n[ACT_LN1] == 0 && q.n[ACT_FCH_GELU] == N * 4 * C, "-ln 0 with -r 2: still no LayerNorm buffers");
    /* a uniform mha model is unchanged by the new tensors */
    const GPT2Config uni = model_of("tiny", NULL);
    attn_select_paths(&uni, ATTN_REQ_AUTO, &h200, 1, path, err, sizeof(err));
    act_plan_init(&q, &uni, B, T, 0, path);
    CHECK(q.n[ACT_PROJ_SCRATCH] == 0 && q.n[ACT_PROJ_STATE] == 0 && q.n[ACT_PROJ_SCRATCH_F32] == 0 && q.n[ACT_MIX_SCRATCH] == 0,
          "mha model: the S-D and linear tensors are empty");
}

static void test_kind_flops(void) {
    const GPT2Config lin = model_of("d12", "12:lin*12"), sd = model_of("d12", "12:sd*12");
    const GPT2Config sdlin = model_of("d12", "12:sdlin*12");
    const double n = 1e8;
    CHECK(train_flops_per_token(&lin, (size_t)n, 1024) == 6.0 * n + 12.0 * 12 * 768 * 64,
          "linear layers: 12 A d per token (no T term)");
    CHECK(train_flops_per_token(&sd, (size_t)n, 1024) == 6.0 * n + 12.0 * (6.0 * 1024 * 768 + 6.0 * 768 * 64),
          "S-D layers: 6 T A + 6 A d for the fold");
    CHECK(train_flops_per_token(&sdlin, (size_t)n, 1024) == 6.0 * n + 12.0 * (12.0 * 768 * 64 + 6.0 * 768 * 64),
          "sdlin: linear + fold");
}

/* argv -> TrainArgs (the trainer's parser) */
static void parse(TrainArgs *a, int *given, const char *const *argv, int argc) {
    train_args_parse(a, argc, (char **)argv, TRAINER_GPU, given);
}

static void test_model_from_args(void) {
    const char *table = "build/tmp_cuda_host_kinds.txt";
    FILE *f = xfopen(table, "w");
    fprintf(f, "4:sd 4:sdlin 4x24:lin 4\n");
    xfclose(f, table);
    TrainArgs a;
    int given[TRAIN_ARGS_MAX_FLAGS];
    const char *argv[] = {"x", "-e", "tiny", "-prism", table, "-ln", "0", "-sd_scalar_d", "1", "-sd_sign", "1",
                          "-sd_init_s", "0.5", "-sd_init_theta", "0.3", "-sd_init_u", "0.25", "-lin_prescale", "1",
                          "-seed", "7"};
    parse(&a, given, argv, 21);
    GPT2Config c;
    char err[1024];
    int ok = model_config_from_args(&a, given, a.init, 0, 0, prism_rules_check, &c, err, sizeof(err));
    CHECK(ok && !c.use_ln && sd_opt_scalar_d(&c) == 1 && sd_opt_sign(&c) == 1 && sd_opt_init_s(&c) == 0.5f && sd_opt_init_theta(&c) == 0.3f &&
              sd_opt_init_u(&c) == 0.25f && lin_opt_prescale(&c) == 1 && c.layer[0].kind == ATTN_SD && c.layer[1].kind == ATTN_SDLIN &&
              c.layer[2].kind == ATTN_LIN && c.layer[2].head_size == 24 && c.layer[2].n_head == 4 &&
              c.layer[3].kind == ATTN_MHA,
          "descriptor + model options + kinds table -> config (%s)", ok ? "ok" : err);
    /* the CPU trainer's way (train_gpt2.c build_model): the same fields set on the descriptor */
    GPT2Config cpu;
    char msg[256];
    config_from_descriptor("tiny", &cpu, msg, sizeof(msg));
    cpu.use_ln = 0;
    kind_opt_set_int(cpu.opt, &SD_SCALAR_D, 1);
    kind_opt_set_int(cpu.opt, &SD_SIGN, 1);
    kind_opt_set_float(cpu.opt, &SD_INIT_S, 0.5f);
    kind_opt_set_float(cpu.opt, &SD_INIT_THETA, 0.3f);
    kind_opt_set_float(cpu.opt, &SD_INIT_U, 0.25f);
    kind_opt_set_int(cpu.opt, &LIN_PRESCALE, 1);
    LayerTable *s = (LayerTable *)xmalloc(sizeof(LayerTable));
    CHECK(layer_table_load(table, &cpu, s) && prism_rules_check(s, table, &cpu), "the table loads (%s)", s->error);
    layer_table_apply(s, &cpu);
    free(s);
    CHECK(memcmp(&cpu, &c, sizeof(c)) == 0, "the GPU trainer's config equals the CPU trainer's byte for byte");
    GPT2 m;
    gpt2_build_from_config(&m, &cpu, 7);
    float *p = model_init_params_host(&c, 7);
    CHECK(memcmp(p, m.params, m.layout.total * sizeof(float)) == 0 && m.layout.slot_size[P_LN1W] == 0 &&
              m.layout.slot_size[P_SDTHETA] == 2 * 4 && m.layout.slot_size[P_SDSKEW] == 2 * 4 * 120,
          "init from the descriptor: bit-identical to gpt2_build_from_config (%zu parameters; no ln1, one theta "
          "per S-D head, 2 x 4 x 120 packed S)", m.layout.total);
    float *p8 = model_init_params_host(&c, 8);
    CHECK(memcmp(p, p8, m.layout.total * sizeof(float)) != 0, "control: another seed gives other weights");
    free(p);
    free(p8);
    gpt2_free(&m);
    /* a checkpoint -e: model options are errors unless resuming; -prism always */
    const char *argv2[] = {"x", "-e", "model.bin", "-ln", "0"};
    /* the model options: -ln, -emb_scale and the kinds' options of the model and its init, not -sd_decay_s */
    int listed = 1;
    const char *model_flags[] = {"-ln", "-emb_scale", "-sd_scalar_d", "-sd_sign", "-sd_init_s", "-sd_init_theta",
                                 "-sd_init_u", "-lin_prescale"};
    for (int i = 0; i < 8; i++) listed &= model_option_flag(i) != NULL && strcmp(model_option_flag(i), model_flags[i]) == 0;
    CHECK(listed && model_option_flag(8) == NULL, "the model-option flags are -ln, -emb_scale and the six S-D and linear ones");
    parse(&a, given, argv2, 5);
    ok = !model_config_from_args(&a, given, a.init, 1, 0, prism_rules_check, &c, err, sizeof(err)) &&
         strncmp(err, "-ln: the checkpoint model.bin carries its own model options", 59) == 0 && !strchr(err, '\n');
    CHECK(ok, "checkpoint + -ln: %s", err);
    CHECK(model_config_from_args(&a, given, a.init, 1, 1, prism_rules_check, &c, err, sizeof(err)), "... allowed when resuming (the checkpoint wins)");
    const char *argv3[] = {"x", "-e", "model.bin", "-prism", table};
    parse(&a, given, argv3, 5);
    ok = !model_config_from_args(&a, given, a.init, 1, 0, prism_rules_check, &c, err, sizeof(err)) && strstr(err, "carries its own layer table");
    CHECK(ok, "checkpoint + -prism: %s", err);
    const char *argv4[] = {"x", "-e", "tiny", "-prism", "build/no_such_table.txt"};
    parse(&a, given, argv4, 5);
    ok = !model_config_from_args(&a, given, a.init, 0, 0, prism_rules_check, &c, err, sizeof(err)) && strstr(err, "no_such_table");
    CHECK(ok, "a missing table is an error naming it: %s", err);
    /* -layers: any table, no Prism rules; -prism: the rules */
    f = xfopen(table, "w");
    fprintf(f, "4 2*3\n");   /* decreasing head counts: a negative control of Prism */
    xfclose(f, table);
    const char *argv5[] = {"x", "-e", "tiny", "-layers", table};
    parse(&a, given, argv5, 5);
    ok = model_config_from_args(&a, given, a.init, 0, 0, prism_rules_check, &c, err, sizeof(err)) &&
         c.layer[0].n_head == 4 && c.layer[1].n_head == 2;
    CHECK(ok, "-layers: a table with decreasing head counts -> config (%s)", ok ? "ok" : err);
    const char *argv6[] = {"x", "-e", "tiny", "-prism", table};
    parse(&a, given, argv6, 5);
    ok = !model_config_from_args(&a, given, a.init, 0, 0, prism_rules_check, &c, err, sizeof(err)) &&
         strstr(err, "must not decrease") && strstr(err, "-layers FILE");
    CHECK(ok, "-prism: the same table is refused, naming -layers: %s", err);
    const char *argv8[] = {"x", "-e", "model.bin", "-layers", table};
    parse(&a, given, argv8, 5);
    ok = !model_config_from_args(&a, given, a.init, 1, 0, prism_rules_check, &c, err, sizeof(err)) &&
         strncmp(err, "-layers ", 8) == 0 && strstr(err, "carries its own layer table");
    CHECK(ok, "checkpoint + -layers: %s", err);
    remove(table);
}

static void test_kind_checkpoint_and_shards(void) {
    GPT2Config c = model_of("tiny", "4:sd 4:sdlin 4x24:lin 4");
    c.use_ln = 0;
    kind_opt_set_int(c.opt, &SD_SCALAR_D, 1);
    kind_opt_set_int(c.opt, &SD_SIGN, 1);
    kind_opt_set_int(c.opt, &LIN_PRESCALE, 1);
    const char *path = "build/tmp_cuda_host_sd.bin";
    GPT2Config back;
    int32_t h[256];
    const int same = bf16_roundtrip(path, &c, 1.0f, 5, &back, h);
    CHECK(same && h[1] == 105 && h[9] == 15 && h[18] == ATTN_SD && h[21] == ATTN_SDLIN && h[23] == 24 &&
              !back.use_ln && sd_opt_scalar_d(&back) && sd_opt_sign(&back) == 1 && lin_opt_prescale(&back),
          "S-D/linear/-ln 0 model: v105, flags %d (no LN | scalar D | +D | prescale), table and bits read back", h[9]);
    remove(path);
    GPT2Config z = model_of("tiny", "4:sd*2 4:sdlin 4:lin");
    check_shards(&z, 1, 2, "tiny S-D + linear");
    check_shards(&z, 0, 3, "tiny S-D + linear");
    ParamLayout pl;
    param_layout_init(&pl, &z);
    ShardPlan *s = (ShardPlan *)xmalloc(sizeof(ShardPlan));
    char err[256];
    int ok = !shard_plan_init(s, &pl, &z, 1, 5, 0, err, sizeof(err)) && strstr(err, "-z 1");
    CHECK(ok, "ZeRO-1 over 5 ranks: an indivisible tensor is named: %s", err);
    ok = shard_plan_init(s, &pl, &z, 0, 1, 0, err, sizeof(err));
    int slots16 = 0;
    for (int i = 0; ok && i < s->nseg; i++) slots16 += s->seg[i].slot == P_SDSKEW || s->seg[i].slot == P_SDTHETA;
    CHECK(ok && slots16 == 6, "the optimizer updates sdskew and sdtheta of the 3 S-D layers (6 segments)");
    free(s);
}

/* -pi tcp/fs: the launcher's node-local rank wins over rank % -pg; junk in a variable is passed over. */
static void test_local_rank(void) {
    const char *vars[] = {"SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK"};
    for (int i = 0; i < 3; i++) unsetenv(vars[i]);
    const char *src = NULL;
    CHECK(local_rank_from_env(13, 8, &src) == 5 && strcmp(src, "-pg") == 0, "no launcher variable: rank 13 %% -pg 8 = 5");
    setenv("LOCAL_RANK", "2", 1);
    CHECK(local_rank_from_env(13, 8, &src) == 2 && strcmp(src, "LOCAL_RANK") == 0, "LOCAL_RANK 2 is taken");
    setenv("SLURM_LOCALID", "3", 1);
    CHECK(local_rank_from_env(13, 8, &src) == 3 && strcmp(src, "SLURM_LOCALID") == 0,
          "SLURM_LOCALID 3 is taken first (srun's placement, not rank %% -pg)");
    setenv("SLURM_LOCALID", "3x", 1);
    CHECK(local_rank_from_env(13, 8, &src) == 2 && strcmp(src, "LOCAL_RANK") == 0, "SLURM_LOCALID '3x' is passed over");
    setenv("SLURM_LOCALID", "-1", 1);
    unsetenv("LOCAL_RANK");
    CHECK(local_rank_from_env(13, 8, &src) == 5 && strcmp(src, "-pg") == 0, "a negative SLURM_LOCALID is passed over");
    for (int i = 0; i < 3; i++) unsetenv(vars[i]);
}


int main(void) {
    test_local_rank();
    test_lt_algo_cache();
    test_act_plan();
    test_shards();
    test_mfu();
    test_buckets();
    test_stochastic_rounding();
    test_bf16_checkpoint();
    test_kind_plan();
    test_kind_flops();
    test_model_from_args();
    test_kind_checkpoint_and_shards();
    return test_finish();
}
