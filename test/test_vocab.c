/*
 * test/test_vocab.c: the model vocabulary V of a descriptor (L<l>C<c>H<h>[T<t>][V<v>]) and what
 * depends on it, without running a model:
 *   - V parsed, Vp = ceil(V/128)*128, GPT-2's 50257 when V is absent; bad V values (0, 1, above
 *     LLMC_MAX_VOCAB, empty, junk, V before T) refused with one line naming the descriptor;
 *   - a V 256 model's checkpoint header carries V 256 and Vp 256 and reads back;
 *   - the evals accept only V 50257 (eval_model_vocab_ok: one line naming the model);
 *   - tokenizer_init_for_model: the byte tokenizer on a V 256 model starts samples from its EOT 0
 *     and decodes every byte; a tokenizer of another size is dropped (samples as ids) and the start
 *     token falls back to 50256 for V 50257, 0 otherwise.
 *
 *   ./build/test_vocab OUT_DIR   (OUT_DIR: a scratch folder; bytes_tokenizer.bin is written there)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../llmc/checkpoint.h"
#include "../llmc/config.h"
#include "../llmc/cpu/gpt2_cpu.h"
#include "../llmc/evalloader.h"
#include "../llmc/tokenizer.h"
#include "harness.h"
#include "../kinds/registry_cpu.h"

static int one_line(const char *s) { return s[0] != '\0' && strchr(s, '\n') == NULL; }

/* The byte tokenizer file as dev/data/bytes_tokenizer.py writes it (llm.c's version 2), or with
 * `vocab` tokens (a mismatched one). */
static void write_byte_tokenizer(const char *path, uint32_t vocab) {
    FILE *f = xfopen(path, "wb");
    uint32_t h[256] = {0};
    h[0] = TOKENIZER_MAGIC;
    h[1] = 2;
    h[2] = vocab;
    h[3] = BYTE_EOT;
    fwrite(h, sizeof(h), 1, f);
    for (uint32_t i = 0; i < vocab; i++) {
        unsigned char e[2] = {1, (unsigned char)(i & 255)};
        fwrite(e, 1, 2, f);
    }
    xfclose(f, path);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
        return 2;
    }
    const char *out = argv[1];
    GPT2Config c;
    char msg[512];

    /* 1. descriptors */
    int ok = config_from_descriptor("L4C128H4T256V256", &c, msg, sizeof(msg));
    CHECK(ok && c.vocab_size == 256 && c.padded_vocab_size == 256 && c.num_layers == 4 && c.channels == 128 &&
              c.num_heads == 4 && c.max_seq_len == 256,
          "L4C128H4T256V256: L 4, C 128, 4 heads, maxT 256, V 256, Vp 256");
    ok = config_from_descriptor("L2C64H2V300", &c, msg, sizeof(msg));
    CHECK(ok && c.vocab_size == 300 && c.padded_vocab_size == 384 && c.max_seq_len == 1024,
          "L2C64H2V300 (no T): V 300, Vp 384, maxT 1024");
    ok = config_from_descriptor("L2C64H2T64V2", &c, msg, sizeof(msg));
    CHECK(ok && c.vocab_size == 2 && c.padded_vocab_size == 128, "V2 (the smallest): Vp 128");
    ok = config_from_descriptor("L2C64H2T64V16777216", &c, msg, sizeof(msg));
    CHECK(ok && c.vocab_size == LLMC_MAX_VOCAB && c.padded_vocab_size == LLMC_MAX_VOCAB,
          "V = LLMC_MAX_VOCAB (16777216) is accepted, Vp = V");
    ok = config_from_descriptor("L2C64H2T64", &c, msg, sizeof(msg));
    CHECK(ok && c.vocab_size == GPT2_VOCAB && c.padded_vocab_size == 50304, "no V: GPT-2's V 50257, Vp 50304");
    ok = config_from_descriptor("d12", &c, msg, sizeof(msg));
    CHECK(ok && c.vocab_size == GPT2_VOCAB, "d12 keeps V 50257");
    static const char *const bad[] = {"L2C64H2T64V0", "L2C64H2T64V1", "L2C64H2T64V16777217", "L2C64H2T64V",
                                      "L2C64H2T64Vx", "L2C64H2V256T64", "L2C64H2T64V256x", "L2C64H2T64V-5"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        msg[0] = '\0';
        ok = config_from_descriptor(bad[i], &c, msg, sizeof(msg));
        char want[64];
        snprintf(want, sizeof(want), "descriptor '%s'", bad[i]);
        CHECK(!ok && one_line(msg) && strstr(msg, want) && strstr(msg, "V<vocab>") && strstr(msg, "[2, 16777216]"),
              "%s refused in one line: %s", bad[i], msg);
    }
    msg[0] = '\0';
    ok = config_from_descriptor("L2C64", &c, msg, sizeof(msg));
    CHECK(!ok && one_line(msg) && strstr(msg, "L<layers>C<channels>H<heads>[T<maxT>][V<vocab>]"),
          "the expected-format message names [V<vocab>]: %s", msg);

    /* 2. a V 256 model's checkpoint */
    ok = config_from_descriptor("L2C64H2T64V256", &c, msg, sizeof(msg));
    GPT2 m;
    gpt2_build_from_config(&m, &c, 42);
    char path[4096];
    snprintf(path, sizeof(path), "%s/v256.bin", out);
    checkpoint_write_fp32(path, &m.config, m.params);
    int32_t h[256];
    FILE *f = xfopen(path, "rb");
    xfread(h, sizeof(int32_t), 256, f, path, "header");
    xfclose(f, path);
    CHECK(h[0] == 20240326 && h[1] == 3 && h[2] == 64 && h[3] == 256 && h[4] == 2 && h[5] == 2 && h[6] == 64 &&
              h[7] == 256,
          "V 256 checkpoint header = {20240326, 3, maxT 64, V 256, L 2, NH 2, C 64, Vp 256} (llm.c's v3)");
    GPT2Config r;
    int is_bf16 = 1;
    checkpoint_read_header(path, &r, &is_bf16);
    CHECK(r.vocab_size == 256 && r.padded_vocab_size == 256 && is_bf16 == 0, "and reads back as V 256, Vp 256");
    gpt2_free(&m);

    /* 3. the evals: GPT-2 vocabulary only */
    char err[8192] = "";
    CHECK(eval_model_vocab_ok("gpt2_124M.bin", 50257, err, sizeof(err)), "evals accept V 50257");
    ok = eval_model_vocab_ok(path, 256, err, sizeof(err));
    CHECK(!ok && one_line(err) && strstr(err, path) && strstr(err, "V is 256") && strstr(err, "GPT-2-tokenized"),
          "evals refuse V 256 in one line naming the checkpoint: %s", err);

    /* 4. tokenizers for samples */
    char tok[4096];
    snprintf(tok, sizeof(tok), "%s/bytes_tokenizer.bin", out);
    write_byte_tokenizer(tok, 256);
    Tokenizer t;
    int start = tokenizer_init_for_model(&t, tok, 256);
    int bytes_ok = t.init_ok && t.vocab_size == 256;
    for (uint32_t i = 1; bytes_ok && i < 256; i++) {
        const char *s = tokenizer_decode(&t, i);
        bytes_ok = s != NULL && (unsigned char)s[0] == i && s[1] == '\0';
    }
    CHECK(start == 0 && bytes_ok, "byte tokenizer on a V 256 model: samples start from EOT 0, token i decodes to byte i");
    tokenizer_free(&t);
    start = tokenizer_init_for_model(&t, tok, GPT2_VOCAB); /* prints one warning */
    CHECK(start == GPT2_EOT && !t.init_ok, "byte tokenizer on a V 50257 model: dropped, samples start from 50256");
    tokenizer_free(&t);
    snprintf(tok, sizeof(tok), "%s/t300.bin", out);
    write_byte_tokenizer(tok, 300);
    start = tokenizer_init_for_model(&t, tok, 256);
    CHECK(start == BYTE_EOT && !t.init_ok && tokenizer_decode(&t, 65) == NULL,
          "a 300-token tokenizer on a V 256 model: dropped (ids printed), samples start from 0");
    tokenizer_free(&t);
    snprintf(tok, sizeof(tok), "%s/missing_tokenizer.bin", out);
    start = tokenizer_init_for_model(&t, tok, 256);
    CHECK(start == BYTE_EOT && !t.init_ok, "a missing tokenizer on a V 256 model: samples start from 0");
    tokenizer_free(&t);
    return test_finish();
}
