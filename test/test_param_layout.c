/*
 * test/test_param_layout.c: Prism is parameter- and matmul-FLOP-neutral (doc/prism.md "Parameter and FLOP neutrality").
 *
 * For each model (d12, d24, L24C1536H24, L8C256H4T256, tiny), the uniform table and every Prism table of that
 * model must give the same ParamLayout (total, every slot's size and offset, every layer's
 * offset) and the same model_matmul_flops_per_token at T = 64 and T = 1024. Known totals (llm.c
 * convention: padded vocabulary Vp = 50304, wpe included, doc/prism.md "Model sizes") are asserted exactly.
 * Negative controls: tables with explicit head sizes (A_l != C) must change both numbers by the
 * amounts computed by hand below.
 *
 * Build and run from the repository root (the preset paths are relative to it):
 *   gcc -O2 -march=native -fopenmp -Wall -Wextra -std=c11 -D_GNU_SOURCE test/test_param_layout.c \
 *       -o /tmp/test_param_layout -lm && /tmp/test_param_layout
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../llmc/config.h"
#include "../llmc/param_layout.h"
#include "../llmc/layer_table.h"
#include "../prism/rules.h"
#include "harness.h"
#include "../kinds/registry.h"

static GPT2Config model_of(const char *desc) {
    GPT2Config c;
    char msg[256];
    if (!config_from_descriptor(desc, &c, msg, sizeof(msg))) llmc_die("%s", msg);
    return c;
}

/* The model's config with a schedule applied; dies if the schedule does not parse. */
static GPT2Config with_schedule(const GPT2Config *base, const char *text, int unchecked) {
    LayerTable s;
    /* -prism's reading, or with unchecked -layers' (no Prism rule) */
    if (!layer_table_parse(text, "inline", base, &s) || (!unchecked && !prism_rules_check(&s, "inline", base))) {
        llmc_die("%s", s.error);
    }
    GPT2Config c = *base;
    layer_table_apply(&s, &c);
    return c;
}

static int layouts_equal(const ParamLayout *a, const ParamLayout *b, int L, char *why, size_t cap) {
    if (a->total != b->total) {
        snprintf(why, cap, "total %zu != %zu", a->total, b->total);
        return 0;
    }
    for (int s = 0; s < param_slot_count(); s++) {
        if (a->slot_size[s] != b->slot_size[s] || a->slot_offset[s] != b->slot_offset[s]) {
            snprintf(why, cap, "slot %s: size %zu vs %zu, offset %zu vs %zu", param_slot_name(s),
                     a->slot_size[s], b->slot_size[s], a->slot_offset[s], b->slot_offset[s]);
            return 0;
        }
        for (int l = 0; l <= L; l++) {
            if (a->layer_offset[s][l] != b->layer_offset[s][l]) {
                snprintf(why, cap, "slot %s layer %d: offset %zu vs %zu", param_slot_name(s), l,
                         a->layer_offset[s][l], b->layer_offset[s][l]);
                return 0;
            }
        }
    }
    snprintf(why, cap, "identical");
    return 1;
}

/* Checks a (Prism) config against the uniform one: layout, 12C^2 + 13C per layer, FLOPs at
 * T = 64 and 1024, and the per-layer offsets l*3*C*C (qkvw) and l*C*C (attprojw). */
static void check_neutral(const char *name, const GPT2Config *uni, const GPT2Config *pc) {
    ParamLayout pu, pp;
    param_layout_init(&pu, uni);
    param_layout_init(&pp, pc);
    char why[256];
    const int L = uni->num_layers;
    const size_t C = (size_t)uni->channels;
    CHECK(layouts_equal(&pu, &pp, L, why, sizeof(why)), "%s: layout equals uniform (%s), total %zu",
          name, why, pp.total);
    int per_layer_ok = 1;
    for (int l = 0; l < L; l++) {
        size_t n = 0;
        for (int s = 0; s < param_slot_count(); s++)
            if (slot_is_per_layer(s)) n += layer_slot_size(pc, l, s);
        if (n != 12 * C * C + 13 * C) per_layer_ok = 0;
    }
    CHECK(per_layer_ok, "%s: every layer has 12C^2 + 13C = %zu parameters", name, 12 * C * C + 13 * C);
    int off_ok = 1;
    for (int l = 0; l < L; l++) {
        off_ok &= pp.layer_offset[P_QKVW][l] == (size_t)l * 3 * C * C;
        off_ok &= param_offset(&pp, P_QKVW, l) == pp.slot_offset[P_QKVW] + (size_t)l * 3 * C * C;
        off_ok &= pp.layer_offset[P_ATTPROJW][l] == (size_t)l * C * C;
        off_ok &= pp.layer_offset[P_QKVB][l] == (size_t)l * 3 * C;
    }
    CHECK(off_ok, "%s: layer l's qkvw at l*3*C*C, attprojw at l*C*C, qkvb at l*3*C", name);
    const int Ts[2] = {64, 1024};
    for (int i = 0; i < 2; i++) {
        double fu = model_matmul_flops_per_token(uni, Ts[i]);
        double fp = model_matmul_flops_per_token(pc, Ts[i]);
        CHECK(fu == fp, "%s: matmul FLOPs/token at T = %d equal uniform (%.0f vs %.0f)", name, Ts[i],
              fp, fu);
    }
}

/* Every preset file named PREFIX*.txt in dir, checked against `uni`; returns how many. */
static int check_files(const char *dir, const char *prefix, const GPT2Config *uni, int unchecked) {
    DIR *d = opendir(dir);
    if (!d) {
        CHECK(0, "%s: cannot open (run from the repository root)", dir);
        return 0;
    }
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0 || len < 5 || len > 100 ||
            strcmp(e->d_name + len - 4, ".txt") != 0)
            continue;
        char path[256];
        snprintf(path, sizeof(path), "%s/%.100s", dir, e->d_name);
        LayerTable s;
        int ok = layer_table_load(path, uni, &s);
        CHECK(ok, "%s: loads (%s)", path, s.error);
        if (!ok) continue;
        /* a negative control (run with -layers) breaks at least one of Prism's rules (an error or
         * a warning under -prism); a preset (run with -prism) breaks none */
        LayerTable r = s;
        const int rules_ok = prism_rules_check(&r, path, uni);
        if (unchecked)
            CHECK(!rules_ok || r.n_warnings > 0, "%s: the rules flag the control (%s; %d warnings)", path,
                  rules_ok ? "no error" : r.error, r.n_warnings);
        else
            CHECK(rules_ok && r.n_warnings == 0, "%s: a preset passes every rule (%d warnings%s%s)", path,
                  r.n_warnings, r.n_warnings ? ": " : "", r.n_warnings ? r.warning[0] : "");
        GPT2Config pc = *uni;
        layer_table_apply(&s, &pc);
        check_neutral(path, uni, &pc);
        n++;
    }
    closedir(d);
    return n;
}

int main(void) {
    /* ---- known totals (llm.c convention) and FLOPs of the uniform models, by hand ---------- */
    const GPT2Config d12 = model_of("d12"), d24 = model_of("d24"), big = model_of("L24C1536H24"),
                     tiny = model_of("tiny");
    ParamLayout p;
    param_layout_init(&p, &d12);
    CHECK(p.total == 124475904u, "d12 total %zu == 124,475,904", p.total);
    param_layout_init(&p, &d24);
    CHECK(p.total == 354871296u, "d24 total %zu == 354,871,296", p.total);
    param_layout_init(&p, &big);
    CHECK(p.total == 758799360u, "L24C1536H24 total %zu == 758,799,360", p.total);
    /* tiny: Vp*C + maxT*C + L*(12C^2 + 13C) + 2C = 3219456 + 4096 + 4*(49152 + 832) + 128 */
    param_layout_init(&p, &tiny);
    CHECK(p.total == 3423616u, "tiny total %zu == 3,423,616", p.total);
    /* d12 FLOPs/token: L (24 C^2 + 4 T C) + 2 C V, V = 50257 (the LM head skips padded rows):
     * T = 64:   12 (14155776 + 196608)  + 77194752 = 249,423,360
     * T = 1024: 12 (14155776 + 3145728) + 77194752 = 284,812,800 */
    CHECK(model_matmul_flops_per_token(&d12, 64) == 249423360.0, "d12 FLOPs/token at T = 64: %.0f "
          "== 249,423,360", model_matmul_flops_per_token(&d12, 64));
    CHECK(model_matmul_flops_per_token(&d12, 1024) == 284812800.0, "d12 FLOPs/token at T = 1024: "
          "%.0f == 284,812,800", model_matmul_flops_per_token(&d12, 1024));

    /* ---- presets: every Prism file of each model against its uniform model ---------------- */
    int n = check_files("prism/schedules", "d12_", &d12, 0);
    CHECK(n >= 5, "d12: %d preset files checked (uniform + P-A..P-D)", n);
    n = check_files("prism/schedules/controls", "d12_", &d12, 1);
    CHECK(n == 5, "d12: %d negative-control files checked (also neutral: A_l = C)", n);
    n = check_files("prism/schedules", "d24_", &d24, 0);
    CHECK(n >= 3, "d24: %d preset files checked", n);
    n = check_files("prism/schedules", "L24C1536_", &big, 0);
    CHECK(n >= 3, "L24C1536H24: %d preset files checked", n);
    /* the CPU demo model of `make train` (8 layers, C 256, base 4 heads of 64) */
    const GPT2Config demo = model_of("L8C256H4T256");
    n = check_files("prism/schedules", "L8C256_", &demo, 0);
    CHECK(n >= 1, "L8C256H4T256: %d preset files checked", n);
    n = check_files("prism/schedules/controls", "L8C256_", &demo, 1);
    CHECK(n == 5, "L8C256H4T256: %d negative-control files checked (R, J, Z, W, C)", n);
    /* the tiny A/B model of scripts/ab.py (4 layers, C 128, base 2 heads of 64) */
    const GPT2Config tiny_ab = model_of("L4C128H2T128");
    n = check_files("prism/schedules", "L4C128_", &tiny_ab, 0);
    CHECK(n >= 1, "L4C128H2T128: %d preset files checked", n);
    n = check_files("prism/schedules/controls", "L4C128_", &tiny_ab, 1);
    CHECK(n == 4, "L4C128H2T128: %d negative-control files checked (R, Z, W, C; J has no 2-head form)", n);

    /* ---- tiny (L 4, C 64, base 4): head sizes 64 down to 1 --------------------------------- */
    const char *tiny_tables[] = {"2*2 4*2", "1*2 4*2", "1 2 4 4", "8*4", "16*4", "64*4", "1 2 8 64",
                                 "4 2 1 1"}; /* not "4*4": that is the uniform model itself */
    for (size_t i = 0; i < sizeof(tiny_tables) / sizeof(tiny_tables[0]); i++) {
        char name[64];
        snprintf(name, sizeof(name), "tiny '%s'", tiny_tables[i]);
        GPT2Config c = with_schedule(&tiny, tiny_tables[i], 1);
        check_neutral(name, &tiny, &c);
    }

    /* ---- negative controls: A_l != C changes both numbers by the hand-computed amounts ----- */
    /* d12 with 12 heads of 32 (A = 384): per layer qkvw shrinks 3 (C - A) C = 884,736, qkvb
     * 3 (C - A) = 1,152, attprojw C (C - A) = 294,912; x 12 layers = 14,169,600 in all.
     * FLOPs/token per layer shrink 2 C 3 (C - A) + 2 C (C - A) + 2 x 2 T (C - A)
     * = 2,359,296 + 1,536 T: x 12 = 29,491,200 at T = 64 and 47,185,920 at T = 1024. */
    {
        GPT2Config c = with_schedule(&d12, "12x32*12", 0);
        ParamLayout pu, pn;
        param_layout_init(&pu, &d12);
        param_layout_init(&pn, &c);
        char why[256];
        CHECK(!layouts_equal(&pu, &pn, 12, why, sizeof(why)), "12x32*12: layout differs (%s)", why);
        CHECK(pu.total - pn.total == 14169600u, "12x32*12: total %zu, %zu fewer (expected "
              "14,169,600)", pn.total, pu.total - pn.total);
        CHECK(pu.slot_size[P_QKVW] - pn.slot_size[P_QKVW] == 10616832u &&
                  pu.slot_size[P_QKVB] - pn.slot_size[P_QKVB] == 13824u &&
                  pu.slot_size[P_ATTPROJW] - pn.slot_size[P_ATTPROJW] == 3538944u,
              "12x32*12: qkvw -10,616,832, qkvb -13,824, attprojw -3,538,944 (got -%zu, -%zu, -%zu)",
              pu.slot_size[P_QKVW] - pn.slot_size[P_QKVW], pu.slot_size[P_QKVB] - pn.slot_size[P_QKVB],
              pu.slot_size[P_ATTPROJW] - pn.slot_size[P_ATTPROJW]);
        int others = 1;
        for (int s = 0; s < param_slot_count(); s++)
            if (s != P_QKVW && s != P_QKVB && s != P_ATTPROJW) others &= pu.slot_size[s] == pn.slot_size[s];
        CHECK(others, "12x32*12: every other slot keeps its size");
        int off_ok = 1;
        for (int l = 0; l <= 12; l++) {
            off_ok &= pn.layer_offset[P_QKVW][l] == (size_t)l * 3 * 384 * 768;
            off_ok &= pn.layer_offset[P_ATTPROJW][l] == (size_t)l * 768 * 384;
        }
        CHECK(off_ok, "12x32*12: layer l's qkvw at l*3*A*C, attprojw at l*C*A (A = 384)");
        double d64 = model_matmul_flops_per_token(&d12, 64) - model_matmul_flops_per_token(&c, 64);
        double d1k = model_matmul_flops_per_token(&d12, 1024) - model_matmul_flops_per_token(&c, 1024);
        CHECK(d64 == 29491200.0, "12x32*12: FLOPs/token at T = 64 drop by %.0f (expected 29,491,200)",
              d64);
        CHECK(d1k == 47185920.0, "12x32*12: FLOPs/token at T = 1024 drop by %.0f (expected "
              "47,185,920)", d1k);
    }
    /* d12 with 12 heads of 128 (A = 1536): per layer +3 (A - C) C + 3 (A - C) + C (A - C)
     * = 1,769,472 + 2,304 + 589,824 = 2,361,600; x 12 = 28,339,200. FLOPs/token per layer
     * +2 C 3 (A - C) + 2 C (A - C) + 4 T (A - C) = 4,718,592 + 3,072 T: x 12 at T = 1024 =
     * 94,371,840. */
    {
        GPT2Config c = with_schedule(&d12, "12x128*12", 0);
        ParamLayout pu, pn;
        param_layout_init(&pu, &d12);
        param_layout_init(&pn, &c);
        CHECK(pn.total - pu.total == 28339200u, "12x128*12: total %zu, %zu more (expected 28,339,200)",
              pn.total, pn.total - pu.total);
        double d1k = model_matmul_flops_per_token(&c, 1024) - model_matmul_flops_per_token(&d12, 1024);
        CHECK(d1k == 94371840.0, "12x128*12: FLOPs/token at T = 1024 grow by %.0f (expected "
              "94,371,840)", d1k);
    }
    /* one narrow layer in an otherwise Prism table: only that layer's blocks shrink, and every
     * later layer's offset moves by exactly that amount */
    {
        GPT2Config c = with_schedule(&d12, "3*2 6*2 12*7 12x32", 0);
        ParamLayout pu, pn;
        param_layout_init(&pu, &d12);
        param_layout_init(&pn, &c);
        CHECK(pu.total - pn.total == 1180800u, "3*2 6*2 12*7 12x32: %zu fewer (one layer: 1,180,800)",
              pu.total - pn.total);
        CHECK(pn.layer_offset[P_QKVW][11] == pu.layer_offset[P_QKVW][11] &&
                  pn.layer_offset[P_QKVW][12] == pu.layer_offset[P_QKVW][12] - 884736u,
              "3*2 6*2 12*7 12x32: layer 11's qkvw offset unchanged, its block 884,736 smaller");
        CHECK(model_matmul_flops_per_token(&d12, 1024) - model_matmul_flops_per_token(&c, 1024) ==
                  (2359296.0 + 1536.0 * 1024) ,
              "3*2 6*2 12*7 12x32: FLOPs/token at T = 1024 drop by one layer's 3,932,160");
    }
    return test_finish();
}
