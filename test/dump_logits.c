/*
 * test/dump_logits.c: the CPU trainer's logits for given token windows, and its greedy decoding,
 * written to a file for tests that compare another implementation with the C model
 * (test/test_export_hf.py: the Hugging Face export, doc/export.md).
 *
 *   build/dump_logits CKPT TOKENS.bin OUT.bin logits B T
 *       TOKENS.bin holds B*T little-endian int32 token ids (B windows of T); OUT.bin receives the
 *       (B, T, V) float32 logits of one gpt2_forward without targets.
 *   build/dump_logits CKPT TOKENS.bin OUT.bin greedy N
 *       TOKENS.bin holds a prompt of n int32 ids; N times: the forward over the whole context
 *       (B 1, T = its length), the argmax of the last position's logits (the lowest id on a tie)
 *       appended. OUT.bin receives the N new int32 ids, then the (N, V) float32 logits each step
 *       chose from.
 *
 * The model is the CPU trainer's (llmc/cpu/gpt2_cpu.h: gpt2_build_from_checkpoint, gpt2_forward);
 * any checkpoint it reads (versions 3, 5, 103, 105) works. Errors are one line and exit 1.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../llmc/cpu/gpt2_cpu.h"
#include "../llmc/utils.h"
#include "../kinds/registry_cpu.h"

static int parse_positive(const char *what, const char *s) {
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || v < 1 || v > (1L << 30)) {
        llmc_die("%s '%s': expected a positive integer", what, s);
    }
    return (int)v;
}

/* The int32 ids of path; their count in *n. */
static int *read_tokens(const char *path, int *n) {
    int64_t size = file_size_or_neg(path);
    if (size < 0) llmc_die("%s: cannot read the token file", path);
    if (size == 0 || size % 4 != 0) {
        llmc_die("%s: %lld bytes; expected a non-empty array of int32 token ids", path, (long long)size);
    }
    *n = (int)(size / 4);
    int *tok = (int *)xmalloc((size_t)size);
    FILE *f = xfopen(path, "rb");
    xfread(tok, sizeof(int), (size_t)*n, f, path, "token ids");
    xfclose(f, path);
    return tok;
}

int main(int argc, char **argv) {
    if (argc != 7 && !(argc == 6 && strcmp(argv[4], "greedy") == 0)) {
        fprintf(stderr, "usage: %s CKPT TOKENS.bin OUT.bin logits B T | greedy N\n", argv[0]);
        return 1;
    }
    const char *ckpt = argv[1], *tok_path = argv[2], *out_path = argv[3], *mode = argv[4];
    if (strcmp(mode, "logits") != 0 && strcmp(mode, "greedy") != 0) {
        llmc_die("mode '%s': expected logits or greedy", mode);
    }
    if (strcmp(mode, "logits") == 0 && argc != 7) llmc_die("logits: expected B and T");
    if (strcmp(mode, "greedy") == 0 && argc != 6) llmc_die("greedy: expected N");
    int n = 0;
    int *tok = read_tokens(tok_path, &n);
    GPT2 model;
    gpt2_build_from_checkpoint(&model, ckpt);
    const int V = model.config.vocab_size, maxT = model.config.max_seq_len;
    AtomicFile out;
    if (strcmp(mode, "logits") == 0) {
        const int B = parse_positive("B", argv[5]), T = parse_positive("T", argv[6]);
        if ((int64_t)B * T != n) {
            llmc_die("%s: %d token ids; B*T = %d*%d = %lld expected", tok_path, n, B, T,
                     (long long)B * T);
        }
        gpt2_forward(&model, tok, NULL, B, T); /* checks T <= maxT and every id < V */
        atomic_open(&out, out_path);
        atomic_write(&out, model.acts.logits, sizeof(float), (size_t)B * T * V);
        atomic_commit(&out);
    } else {
        const int N = parse_positive("N", argv[5]);
        if ((int64_t)n + N - 1 > maxT) {
            llmc_die("greedy: a prompt of %d ids and %d new ones need %d positions; maxT = %d", n,
                     N, n + N - 1, maxT);
        }
        int *ctx = (int *)xmalloc((size_t)(n + N) * sizeof(int));
        memcpy(ctx, tok, (size_t)n * sizeof(int));
        float *rows = (float *)xmalloc((size_t)N * V * sizeof(float));
        for (int step = 0; step < N; step++) {
            const int T = n + step;
            gpt2_forward(&model, ctx, NULL, 1, T);
            const float *row = model.acts.logits + (size_t)(T - 1) * V;
            int best = 0;
            for (int i = 1; i < V; i++) {
                if (row[i] > row[best]) best = i;
            }
            ctx[T] = best;
            memcpy(rows + (size_t)step * V, row, (size_t)V * sizeof(float));
        }
        atomic_open(&out, out_path);
        atomic_write(&out, ctx + n, sizeof(int), (size_t)N);
        atomic_write(&out, rows, sizeof(float), (size_t)N * V);
        atomic_commit(&out);
        free(ctx);
        free(rows);
    }
    free(tok);
    gpt2_free(&model);
    return 0;
}
