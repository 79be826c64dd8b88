/*
 * test/test_checkpoint.c: model checkpoint files (doc/formats.md "Model checkpoint").
 *
 *   ./test_checkpoint UNIFORM_FP32.bin PRISM_FP32.bin UNIFORM_BF16.bin OUT_DIR
 *
 * The three inputs are written by train_gpt2.py (test/test_checkpoint.sh makes them). Checks:
 * a load + write round trip reproduces PyTorch's files byte for byte (so a uniform file is
 * exactly llm.c's format and a Prism file our v103); the v3 header fields; the layer table of a
 * Prism file and its refusal by llm.c's version check; bf16 files widen exactly; a C-initialized
 * model with every kind and every flag set round-trips bit-exactly.
 */
#include <stdio.h>
#include <string.h>

#include "../llmc/cpu/gpt2_cpu.h"
#include "harness.h"
#include "../kinds/registry_cpu.h"

static int files_equal(const char *a, const char *b) {
    FILE *fa = xfopen(a, "rb"), *fb = xfopen(b, "rb");
    int eq = 1;
    for (;;) {
        int ca = fgetc(fa), cb = fgetc(fb);
        if (ca != cb) { eq = 0; break; }
        if (ca == EOF) break;
    }
    fclose(fa);
    fclose(fb);
    return eq;
}

static void read_header(const char *path, int32_t *h) {
    FILE *f = xfopen(path, "rb");
    xfread(h, sizeof(int32_t), 256, f, path, "header");
    fclose(f);
}

/* llm.c's loader (train_gpt2.c / train_gpt2.cu, doc/formats.md "Header") accepts a model file iff the
 * magic is 20240326 and the version is 3 or 5; it reads nothing past header[7]. */
static int upstream_llmc_accepts(const int32_t *h) {
    return h[0] == 20240326 && (h[1] == 3 || h[1] == 5);
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s UNIFORM_FP32.bin PRISM_FP32.bin UNIFORM_BF16.bin OUT_DIR\n", argv[0]);
        return 2;
    }
    const char *uni = argv[1], *pri = argv[2], *bf = argv[3], *out = argv[4];
    char path[4200];
    int32_t h[256];

    /* 1. uniform: load, write, compare with the PyTorch file byte for byte */
    GPT2 u;
    gpt2_build_from_checkpoint(&u, uni);
    CHECK(config_is_llmc_uniform(&u.config), "uniform file loads as an llm.c-uniform model");
    path_join(path, sizeof(path), out, "uniform_rt.bin");
    checkpoint_write_fp32(path, &u.config, u.params);
    CHECK(files_equal(path, uni), "uniform: C load + write reproduces the PyTorch file byte for byte");
    read_header(path, h);
    int zeros = 1;
    for (int i = 8; i < 256; i++) zeros &= h[i] == 0;
    CHECK(h[0] == 20240326 && h[1] == 3 && h[2] == 64 && h[3] == 50257 && h[4] == 4 && h[5] == 4 &&
              h[6] == 64 && h[7] == 50304 && zeros,
          "uniform header = {20240326, 3, maxT 64, V 50257, L 4, NH 4, C 64, Vp 50304, 0...}");
    CHECK(file_size_or_neg(path) == 1024 + 4 * (int64_t)u.layout.total, "uniform file size = 1024 + 4 x %zu",
          u.layout.total);
    CHECK(upstream_llmc_accepts(h), "llm.c's version check accepts the uniform file");

    /* 2. Prism: version 103 with the table; llm.c refuses it */
    GPT2 p;
    gpt2_build_from_checkpoint(&p, pri);
    path_join(path, sizeof(path), out, "prism_rt.bin");
    checkpoint_write_fp32(path, &p.config, p.params);
    CHECK(files_equal(path, pri), "Prism: C load + write reproduces the PyTorch file byte for byte");
    read_header(path, h);
    CHECK(h[1] == 103 && h[8] == 1 && h[9] == 0, "Prism header: version 103, table revision 1, flags 0");
    CHECK(h[16] == 1 && h[17] == 64 && h[18] == 0 && h[19] == 2 && h[20] == 32 && h[22] == 4 && h[23] == 16,
          "Prism table: layer 0 = 1 x 64 mha, layer 1 = 2 x 32, layer 2 = 4 x 16");
    CHECK(!upstream_llmc_accepts(h), "llm.c's version check refuses the Prism file (version %d)", h[1]);
    CHECK(p.layout.total == u.layout.total, "Prism and uniform files hold the same parameter count");

    /* 3. bf16 (v5) widens to exactly the bf16 rounding of the fp32 values */
    GPT2 b;
    gpt2_build_from_checkpoint(&b, bf);
    size_t bad = 0;
    for (size_t i = 0; i < u.layout.total; i++) bad += b.params[i] != bf16_to_f32(f32_to_bf16(u.params[i]));
    CHECK(bad == 0, "bf16 file = round-to-nearest-even bf16 of the fp32 file (%zu mismatches)", bad);

    /* 4. a C-initialized model round-trips bit-exactly, table and flags included: every S-D and
     * linear kind, explicit head sizes (attention width != C), and each flag away from its default
     * (-ln 0, scalar D, the +D sign, linear prescale). The init scales are not stored (doc/formats.md
     * "Model checkpoint"), so they are the only config fields not compared. */
    GPT2Config cc;
    char msg[256];
    if (!config_from_descriptor("tiny", &cc, msg, sizeof(msg))) llmc_die("%s", msg);
    const LayerSpec table[4] = {{2, 24, ATTN_SD}, {1, 64, ATTN_SDLIN}, {4, 16, ATTN_LIN}, {8, 8, ATTN_MHA}};
    memcpy(cc.layer, table, sizeof(table));
    cc.use_ln = 0;
    kind_opt_set_int(cc.opt, &SD_SCALAR_D, 1);
    kind_opt_set_int(cc.opt, &SD_SIGN, 1);
    kind_opt_set_int(cc.opt, &LIN_PRESCALE, 1);
    GPT2 ci;
    gpt2_build_from_config(&ci, &cc, 7);
    path_join(path, sizeof(path), out, "c_init.bin");
    checkpoint_write_fp32(path, &ci.config, ci.params);
    GPT2 r;
    gpt2_build_from_checkpoint(&r, path);
    GPT2Config want = ci.config;
    kind_opt_set_float(want.opt, &SD_INIT_S, sd_opt_init_s(&r.config));
    kind_opt_set_float(want.opt, &SD_INIT_THETA, sd_opt_init_theta(&r.config));
    kind_opt_set_float(want.opt, &SD_INIT_U, sd_opt_init_u(&r.config));
    CHECK(r.layout.total == ci.layout.total && memcmp(&r.config, &want, sizeof(want)) == 0 &&
              memcmp(r.params, ci.params, ci.layout.total * sizeof(float)) == 0,
          "C init (sd, sdlin, lin, mha; -ln 0, scalar D, +D, prescale): write + read gives the same "
          "config and bit-identical parameters (%zu)", ci.layout.total);
    CHECK(!file_exists(strcat(path, ".tmp")), "no .tmp file left after a write");

    gpt2_free(&u);
    gpt2_free(&p);
    gpt2_free(&b);
    gpt2_free(&r);
    gpt2_free(&ci);
    return test_finish();
}
