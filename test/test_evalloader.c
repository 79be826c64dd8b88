/*
 * test/test_evalloader.c: llmc/evalloader.h, the eval-file reader, batcher and scorer.
 *
 * Writes small version-1 and version-2 files byte by byte (independently of the Python writer),
 * then checks: the parsed fields; one error line naming the file and field for each kind of
 * corruption (short header, wrong magic, wrong version, truncated body, out-of-order example
 * index, bad delimiter, wrong example_bytes, label out of range, a version-1 example without 4
 * completions, a token outside the vocabulary, trailing bytes, a missing file); the B and T
 * limits; the packing of whole examples into rows; and the scoring rules (acc = argmin of the sum,
 * acc_norm = argmin of the mean, first option on a tie, greedy = every token the argmax) through a
 * fake forward whose losses are known. Everything is exact: no tolerance.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../llmc/eval_cli.h" /* eval_format_ppl; it includes evalloader.h */
#include "../llmc/evalloader.h"
#include "harness.h"

#define DIR "build/tmp_evalloader"
#define MAXW 4096

/* ----------------------------------------------------------------------------------------------
 * A tiny writer: examples as uint16 words, a header, a file. */
typedef struct {
    uint16_t w[MAXW];
    int n;
    int longest;
} Stream;

static void put(Stream *s, int v) { s->w[s->n++] = (uint16_t)v; }

/* seqs: nseq sequences, each {len, tokens...} flattened in `flat`. */
static void put_example(Stream *s, int version, int idx, int label, int ncomp, int nctx, const int *flat, int nseq) {
    const int start = s->n;
    put(s, 65535);
    put(s, 0);
    put(s, idx);
    put(s, label);
    put(s, ncomp);
    if (version == 2) put(s, nctx);
    int p = 0;
    for (int q = 0; q < nseq; q++) {
        const int len = flat[p++];
        put(s, len);
        for (int t = 0; t < len; t++) put(s, flat[p++]);
    }
    s->w[start + 1] = (uint16_t)(2 * (s->n - start));
    if (2 * (s->n - start) > s->longest) s->longest = 2 * (s->n - start);
}

static void write_file(const char *path, const int32_t *h, const Stream *s, int body_words) {
    FILE *f = fopen(path, "wb");
    fwrite(h, sizeof(int32_t), 256, f);
    fwrite(s->w, sizeof(uint16_t), (size_t)body_words, f);
    fclose(f);
}

static void header(int32_t *h, int version, int n, int longest, int scoring, int max_rows) {
    memset(h, 0, 256 * sizeof(int32_t));
    h[0] = EVAL_MAGIC;
    h[1] = version;
    h[2] = n;
    h[3] = longest;
    if (version == 2) {
        h[4] = scoring;
        h[5] = max_rows;
        memcpy(h + EVAL_NAME_SLOT, "toy", 4);
    }
}

/* A version-1 file of 2 HellaSwag-like examples (context, 4 completions). */
static const int V1_EX0[] = {3, 10, 11, 12, /* completions */ 1, 20, 2, 21, 22, 1, 23, 3, 24, 25, 26};
static const int V1_EX1[] = {2, 30, 31, 2, 40, 41, 1, 42, 1, 43, 1, 44};

static void build_v1(Stream *s) {
    memset(s, 0, sizeof(*s));
    put_example(s, 1, 0, 3, 4, 1, V1_EX0, 5);
    put_example(s, 1, 1, 0, 4, 1, V1_EX1, 5);
}

/* Expects evalfile_read to fail with one line containing `a` and `b`. */
static void expect_fail(const char *path, int V, const char *a, const char *b, const char *what) {
    EvalFile ef;
    char err[4400] = "";
    const int ok = evalfile_read(&ef, path, V, err, sizeof(err));
    CHECK(!ok && strchr(err, '\n') == NULL && strstr(err, path) && strstr(err, a) && strstr(err, b),
          "%s is rejected: %s", what, err);
    if (ok) evalfile_free(&ef);
}

static void test_v1_valid(void) {
    Stream s;
    build_v1(&s);
    int32_t h[256];
    header(h, 1, 2, s.longest, 0, 0);
    write_file(DIR "/v1.bin", h, &s, s.n);
    EvalFile ef;
    char err[4400] = "";
    const int ok = evalfile_read(&ef, DIR "/v1.bin", 100, err, sizeof(err));
    CHECK(ok, "version-1 file reads (%s)", err);
    if (!ok) return;
    const EvalExample *e = &ef.ex[0];
    CHECK(ef.version == 1 && ef.num_examples == 2 && ef.scoring == EVAL_SCORE_CHOICE && ef.max_rows == 4 &&
              ef.name[0] == '\0', "v1 header: version 1, 2 examples, choice, 4 options, no name");
    CHECK(e->label == 3 && e->n_ctx == 1 && e->n_comp == 4 && e->n_rows == 4 && e->ctx_len[0] == 3 &&
              e->ctx[0][2] == 12, "v1 example 0: label 3, one context of 3 tokens, 4 completions");
    CHECK(e->comp_len[3] == 3 && e->comp[3][0] == 24 && e->comp[3][2] == 26 && ef.ex[1].comp[3][0] == 44,
          "v1 completions: lengths and tokens as written");
    CHECK(eval_row_positions(e, 3) == 5 && eval_example_positions(e) == 5,
          "a row of 3 context + 3 completion tokens needs 5 input positions");
    char why[256];
    CHECK(evalfile_check_shape(&ef, 2, 3, 64, why, sizeof(why)) == 0 && strstr(why, "-b 4"),
          "B 3 < 4 options: example 0 flagged with the hint -b 4 (%s)", why);
    CHECK(evalfile_check_shape(&ef, 2, 4, 4, why, sizeof(why)) == 0 && strstr(why, "needs 5 positions"),
          "T 4 < 5 positions: example 0 flagged (%s)", why);
    CHECK(evalfile_check_shape(&ef, 2, 4, 5, why, sizeof(why)) == -1, "B 4, T 5 fits both examples");
    evalfile_free(&ef);
}

static void test_corruptions(void) {
    Stream s;
    build_v1(&s);
    int32_t h[256];
    header(h, 1, 2, s.longest, 0, 0);
    FILE *f = fopen(DIR "/short_header.bin", "wb");
    fwrite(h, 1, 1000, f);
    fclose(f);
    expect_fail(DIR "/short_header.bin", 100, "header", "1024-byte", "a 1000-byte file");

    h[0] = 20240520; /* a token shard's magic */
    write_file(DIR "/magic.bin", h, &s, s.n);
    expect_fail(DIR "/magic.bin", 100, "header[0] magic 20240520", "expected 20240522", "wrong magic");
    header(h, 3, 2, s.longest, 0, 0);
    write_file(DIR "/version.bin", h, &s, s.n);
    expect_fail(DIR "/version.bin", 100, "header[1] version 3", "expected 1 or 2", "wrong version");

    header(h, 1, 2, s.longest, 0, 0);
    write_file(DIR "/truncated.bin", h, &s, s.n - 3);
    expect_fail(DIR "/truncated.bin", 100, "example 1", "truncated", "a body cut 3 words short");
    header(h, 1, 3, s.longest, 0, 0);
    write_file(DIR "/count.bin", h, &s, s.n);
    expect_fail(DIR "/count.bin", 100, "example 2", "truncated", "header[2] larger than the examples present");
    header(h, 1, 1, s.longest, 0, 0);
    write_file(DIR "/trailing.bin", h, &s, s.n);
    expect_fail(DIR "/trailing.bin", 100, "bytes after the last", "header[2] = 1", "trailing bytes");

    header(h, 1, 2, s.longest, 0, 0);
    Stream bad = s;
    bad.w[bad.w[1] / 2 + 2] = 0; /* example 1 claims index 0 */
    write_file(DIR "/order.bin", h, &bad, bad.n);
    expect_fail(DIR "/order.bin", 100, "example 1: example_index 0", "expected 1", "example index out of order");
    bad = s;
    bad.w[0] = 65534;
    write_file(DIR "/delim.bin", h, &bad, bad.n);
    expect_fail(DIR "/delim.bin", 100, "example 0: delimiter 65534", "expected 65535", "bad delimiter");
    bad = s;
    bad.w[1] += 2;
    write_file(DIR "/bytes.bin", h, &bad, bad.n);
    expect_fail(DIR "/bytes.bin", 100, "example 0: example_bytes", "add up to", "wrong example_bytes");
    bad = s;
    bad.w[3] = 4;
    write_file(DIR "/label.bin", h, &bad, bad.n);
    expect_fail(DIR "/label.bin", 100, "example 0: label 4", "[0, 4)", "label out of range");
    bad = s;
    bad.w[6] = 99; /* context token 10 -> 99 */
    write_file(DIR "/vocab.bin", h, &bad, bad.n);
    expect_fail(DIR "/vocab.bin", 50, "context 0 token 0 = 99", "vocab size 50", "a token outside the vocabulary");
    header(h, 1, 2, 10, 0, 0);
    write_file(DIR "/longest.bin", h, &s, s.n);
    expect_fail(DIR "/longest.bin", 100, "header[3] longest_example_bytes", "at most 10", "longest_example_bytes too small");

    Stream three;
    memset(&three, 0, sizeof(three));
    const int ex[] = {1, 5, 1, 6, 1, 7, 1, 8};
    put_example(&three, 1, 0, 0, 3, 1, ex, 4);
    header(h, 1, 1, three.longest, 0, 0);
    write_file(DIR "/three.bin", h, &three, three.n);
    expect_fail(DIR "/three.bin", 100, "num_completions 3", "expected 4 in a version-1 file", "v1 with 3 completions");
    expect_fail(DIR "/does_not_exist.bin", 100, "cannot open eval file", "No such file", "a missing file");
}

/* Version 2: a choice example with per-option contexts and a shared continuation, a choice
 * example with 2 options, and a greedy file. */
static void test_v2(void) {
    Stream s;
    memset(&s, 0, sizeof(s));
    const int wino[] = {2, 1, 2, 3, 1, 3, 4, /* shared continuation */ 2, 5, 6};
    put_example(&s, 2, 0, 1, 1, 2, wino, 3);
    const int piqa[] = {1, 7, 1, 8, 3, 9, 10, 11};
    put_example(&s, 2, 1, 0, 2, 1, piqa, 3);
    int32_t h[256];
    header(h, 2, 2, s.longest, 0, 2);
    write_file(DIR "/v2.bin", h, &s, s.n);
    EvalFile ef;
    char err[4400] = "";
    int ok = evalfile_read(&ef, DIR "/v2.bin", 100, err, sizeof(err));
    CHECK(ok, "version-2 file reads (%s)", err);
    if (!ok) return;
    CHECK(ef.version == 2 && strcmp(ef.name, "toy") == 0 && ef.max_rows == 2, "v2 header: version, name 'toy'");
    const EvalExample *w = &ef.ex[0];
    const uint16_t *c0, *c1, *k0, *k1;
    int nc0, nc1, nk0, nk1;
    eval_row(w, 0, &c0, &nc0, &k0, &nk0);
    eval_row(w, 1, &c1, &nc1, &k1, &nk1);
    CHECK(w->n_ctx == 2 && w->n_comp == 1 && w->n_rows == 2 && nc0 == 2 && nc1 == 3 && c1[2] == 4 && k0 == k1 &&
              nk0 == 2, "per-option contexts (2 and 3 tokens) share one 2-token continuation");
    CHECK(evalfile_uses_norm(&ef) == 1, "a file with per-option completions reports acc_norm");

    /* pack with B 4: both examples (2 rows each) in one batch; T_used = longest row = 4 */
    EvalBatch b;
    eval_batch_init(&b, 4, 16);
    const int count = eval_batch_pack(&b, &ef, 0, 2, 99);
    const int row1_in[4] = {1, 3, 4, 5}, row1_tg[4] = {-1, -1, 5, 6};
    CHECK(count == 2 && b.rows == 4 && b.T_used == 4, "B 4 packs 2 examples of 2 options; T_used %d = 4", b.T_used);
    CHECK(memcmp(b.inputs + 4, row1_in, sizeof(row1_in)) == 0 && memcmp(b.targets + 4, row1_tg, sizeof(row1_tg)) == 0,
          "row 1 = context [1 3 4] + continuation [5 6]: inputs 1 3 4 5, targets -1 -1 5 6 (scored only)");
    CHECK(b.inputs[0] == 1 && b.inputs[3] == 99 && b.targets[2] == 6 && b.targets[3] == -1,
          "row 0 (3 positions) is padded with the pad token at position 3");
    CHECK(b.row_example[2] == 1 && b.row_option[3] == 1 && b.inputs[8] == 7 && b.targets[8] == 8 &&
              b.inputs[9] == 99 && b.inputs[13] == 9, "rows 2-3 hold example 1: context 7, completions [8] and [9 10 11]");
    eval_batch_free(&b);
    eval_batch_init(&b, 3, 16);
    CHECK(eval_batch_pack(&b, &ef, 0, 2, 99) == 1 && b.rows == 2, "B 3 holds only the first 2-option example");
    eval_batch_free(&b);
    evalfile_free(&ef);

    /* a greedy file: one row, one continuation */
    Stream g;
    memset(&g, 0, sizeof(g));
    const int lam[] = {2, 1, 2, 2, 3, 4};
    put_example(&g, 2, 0, 0, 1, 1, lam, 2);
    put_example(&g, 2, 1, 0, 1, 1, lam, 2);
    header(h, 2, 2, g.longest, 1, 1);
    write_file(DIR "/greedy.bin", h, &g, g.n);
    ok = evalfile_read(&ef, DIR "/greedy.bin", 100, err, sizeof(err));
    CHECK(ok && ef.scoring == EVAL_SCORE_GREEDY && !evalfile_uses_norm(&ef), "greedy v2 file reads (%s)", err);
    if (ok) evalfile_free(&ef);

    /* a choice file may not hold a 1-option example, nor a greedy file a 2-option one */
    header(h, 2, 2, g.longest, 0, 1);
    write_file(DIR "/choice1.bin", h, &g, g.n);
    expect_fail(DIR "/choice1.bin", 100, "example 0: 1 option", "2 or more", "a 1-option choice example");
    header(h, 2, 2, s.longest, 1, 2);
    write_file(DIR "/greedy2.bin", h, &s, s.n);
    expect_fail(DIR "/greedy2.bin", 100, "example 0: 2 options", "greedy", "a 2-option greedy example");
    header(h, 2, 2, s.longest, 7, 2);
    write_file(DIR "/scoring.bin", h, &s, s.n);
    expect_fail(DIR "/scoring.bin", 100, "header[4] scoring 7", "expected 0 (choice) or 1 (greedy)", "unknown scoring");
    Stream mix;
    memset(&mix, 0, sizeof(mix));
    const int m3[] = {1, 1, 1, 2, 1, 3, 1, 4, 1, 5};
    put_example(&mix, 2, 0, 0, 2, 3, m3, 5); /* 3 contexts with 2 completions */
    header(h, 2, 1, mix.longest, 0, 3);
    write_file(DIR "/mix.bin", h, &mix, mix.n);
    expect_fail(DIR "/mix.bin", 100, "num_contexts 3, num_completions 2", "1 or the same count",
                "3 contexts with 2 completions");
}

/* ----------------------------------------------------------------------------------------------
 * Scoring through a fake forward: the loss at every scored position is table[input token] (and
 * 1000 where nothing is scored, which must never count), and the argmax is
 * (input token + 1) mod 8, so the outcome of each rule is known in advance. */
typedef struct {
    float losses[64 * 16];
    int argmax[64 * 16];
    int calls;
} Fake;

static void fake_forward(void *ctx, const int *inputs, const int *targets, int B, int T, int need_argmax,
                         const float **losses, const int **argmax) {
    (void)need_argmax;
    Fake *fk = (Fake *)ctx;
    static const float table[8] = {0, 1.0f, 3.0f, 0.5f, 0.5f, 2.0f, 2.2f, 9.0f};
    for (int i = 0; i < B * T; i++) {
        fk->losses[i] = targets[i] >= 0 ? table[inputs[i] % 8] : 1000.0f;
        fk->argmax[i] = (inputs[i] + 1) % 8;
    }
    fk->calls++;
    *losses = fk->losses;
    *argmax = fk->argmax;
}

static void test_scoring(void) {
    /* Example 0, context [1]: option 0 = [2] (loss at pos 0 = table[1] = 1.0, mean 1.0);
     * option 1 = [3 4] (losses table[1] + table[3] = 1.5, mean 0.75). acc (sum) picks 0,
     * acc_norm (mean) picks 1; label 1 -> acc 0, acc_norm 1.
     * Example 1, context [5]: options [6] and [6] tie at 2.0: the first wins both rules; label 0. */
    Stream s;
    memset(&s, 0, sizeof(s));
    const int e0[] = {1, 1, 1, 2, 2, 3, 4};
    const int e1[] = {1, 5, 1, 6, 1, 6};
    put_example(&s, 2, 0, 1, 2, 1, e0, 3);
    put_example(&s, 2, 1, 0, 2, 1, e1, 3);
    int32_t h[256];
    header(h, 2, 2, s.longest, 0, 2);
    write_file(DIR "/score.bin", h, &s, s.n);
    EvalFile ef;
    evalfile_load(&ef, DIR "/score.bin", 8);
    Fake fk;
    memset(&fk, 0, sizeof(fk));
    EvalResults res;
    eval_run(&ef, 2, 2, 8, 8, fake_forward, &fk, &res);
    CHECK(fk.calls == 2, "B 2 with 2-option examples: one forward per example (%d)", fk.calls);
    CHECK(res.rows[1].sum_loss == 1.5 && res.rows[1].n_tok == 2 && res.rows[0].sum_loss == 1.0,
          "option losses summed over the completion tokens only: 1.0 and 1.5");
    CHECK(res.pred_sum[0] == 0 && res.pred_mean[0] == 1, "example 0: acc picks option 0 (sum), acc_norm option 1 (mean)");
    CHECK(res.pred_sum[1] == 0 && res.pred_mean[1] == 0, "example 1: an exact tie goes to the first option");
    CHECK(res.correct_sum == 1 && res.correct_mean == 2, "totals: acc 1/2, acc_norm 2/2");
    eval_results_free(&res);
    /* negative control: the same file scored with B 4 packs both examples in one forward and must
     * give the same results */
    memset(&fk, 0, sizeof(fk));
    eval_run(&ef, 2, 4, 8, 8, fake_forward, &fk, &res);
    CHECK(fk.calls == 1 && res.correct_sum == 1 && res.correct_mean == 2, "B 4: one forward, same totals");
    eval_results_free(&res);
    evalfile_free(&ef);

    /* greedy: context [1 2], continuation [3 4]: argmax(pos 1, input 2) = 3 ok, argmax(pos 2,
     * input 3) = 4 ok -> correct. Context [1 2], continuation [3 5]: 5 != 4 -> wrong. */
    Stream g;
    memset(&g, 0, sizeof(g));
    const int ok_ex[] = {2, 1, 2, 2, 3, 4};
    const int bad_ex[] = {2, 1, 2, 2, 3, 5};
    put_example(&g, 2, 0, 0, 1, 1, ok_ex, 2);
    put_example(&g, 2, 1, 0, 1, 1, bad_ex, 2);
    header(h, 2, 2, g.longest, 1, 1);
    write_file(DIR "/greedy_score.bin", h, &g, g.n);
    evalfile_load(&ef, DIR "/greedy_score.bin", 8);
    memset(&fk, 0, sizeof(fk));
    eval_run(&ef, 2, 4, 8, 8, fake_forward, &fk, &res);
    CHECK(res.rows[0].all_argmax == 1 && res.rows[1].all_argmax == 0 && res.correct_sum == 1,
          "greedy: correct only when every continuation token is the argmax (1 of 2)");
    CHECK(res.greedy_tokens == 4 && res.greedy_loss == 2 * (3.0 + 0.5), "greedy: continuation loss summed (7.0)");
    eval_results_free(&res);
    evalfile_free(&ef);
}

/* eval_losses_from_logits: the loss -log softmax(z)[target] against a closed form, the argmax with
 * its first-maximum tie rule, and nothing written as scored where the target is -1. */
static void test_losses_from_logits(void) {
    enum { N = 3, V = 4 };
    const float z[N * V] = {1.0f, 3.0f, 3.0f, 0.0f,   /* tie between 1 and 2: argmax 1 */
                            -2.0f, 0.5f, 0.0f, 4.0f,  /* argmax 3 */
                            9.0f, 0.0f, 0.0f, 0.0f};  /* unscored */
    const int targets[N] = {0, 3, -1};
    float losses[N];
    int argmax[N];
    eval_losses_from_logits(z, targets, N, V, losses, argmax);
    double lse0 = log(exp(1.0) + 2 * exp(3.0) + exp(0.0));
    double lse1 = log(exp(-2.0) + exp(0.5) + exp(0.0) + exp(4.0));
    CHECK(fabs(losses[0] - (lse0 - 1.0)) < 1e-6 && fabs(losses[1] - (lse1 - 4.0)) < 1e-6,
          "losses = logsumexp - z[target] within 1e-6 (%g, %g)", losses[0], losses[1]);
    CHECK(argmax[0] == 1 && argmax[1] == 3, "argmax: first maximum on a tie (%d), plain maximum (%d)", argmax[0],
          argmax[1]);
    CHECK(losses[2] == 0.0f && argmax[2] == -1, "unscored position: loss 0, argmax -1");
    const float first[N] = {losses[0], losses[1], losses[2]};
    for (int i = 0; i < N; i++) losses[i] = NAN; /* sentinels: each loss must be written again */
    eval_losses_from_logits(z, targets, N, V, losses, NULL); /* argmax optional */
    CHECK(memcmp(losses, first, sizeof(first)) == 0, "losses without the argmax output are the same, bit for bit");
}

/* Every header field with a range, at its bounds and one past each: a value in range gets past the
 * header (the file reads, or fails later for a reason other than that field), one outside is
 * rejected naming the field and its range. */
static int header_field_result(int field, int value, char *err, size_t cap) {
    Stream s;
    memset(&s, 0, sizeof(s));
    const int piqa[] = {1, 7, 1, 8, 3, 9, 10, 11};
    put_example(&s, 2, 0, 0, 2, 1, piqa, 3);
    int32_t h[256];
    header(h, 2, 1, s.longest, 0, 2);
    h[field] = value;
    write_file(DIR "/bound.bin", h, &s, s.n);
    EvalFile ef;
    err[0] = '\0';
    const int ok = evalfile_read(&ef, DIR "/bound.bin", 100, err, cap);
    if (ok) evalfile_free(&ef);
    return ok;
}

static void test_header_bounds(void) {
    static const struct { int field; const char *name; int lo, hi; } F[] = {
        {2, "header[2] num_examples", 1, 65535},
        {3, "header[3] longest_example_bytes", 1, 65535},
        {4, "header[4] scoring", 0, 1},
        {5, "header[5] max options", 1, EVAL_MAX_ROWS},
    };
    char err[4400];
    for (size_t i = 0; i < sizeof(F) / sizeof(F[0]); i++) {
        const int in_range[2] = {F[i].lo, F[i].hi}, outside[2] = {F[i].lo - 1, F[i].hi + 1};
        for (int k = 0; k < 2; k++) {
            char refusal[96]; /* the header check's message for this value */
            snprintf(refusal, sizeof(refusal), "%s %d: expected", F[i].name, in_range[k]);
            header_field_result(F[i].field, in_range[k], err, sizeof(err));
            CHECK(strstr(err, refusal) == NULL, "%s = %d is accepted by the header check (%s)", F[i].name,
                  in_range[k], err[0] ? err : "file reads");
            const int ok = header_field_result(F[i].field, outside[k], err, sizeof(err));
            CHECK(!ok && strstr(err, F[i].name) && strstr(err, "expected"), "%s = %d is rejected: %s", F[i].name,
                  outside[k], err);
        }
    }
    const int ok = header_field_result(2, INT32_MIN, err, sizeof(err));
    CHECK(!ok && strstr(err, "header[2] num_examples -2147483648"), "num_examples INT32_MIN is rejected: %s", err);
}

/* The perplexity column of eval_gpt2's table is EVAL_PPL_WIDTH (10) characters: a random model's
 * LAMBADA perplexity is in the millions, which "%.6g" printed as "3.06432e+06" (11), pushing the
 * columns after it out of line. Each value below, and 1.23456789 * 10^k for every k a double
 * reaches, must fit, read back within 0.05%, and values the old format printed within 10
 * characters keep their text. */
static void test_ppl_format(void) {
    static const struct { double v; const char *want; } cases[] = {
        {1.5, "1.5"}, {12.3456789, "12.3457"}, {123456.7, "123457"}, /* as "%.6g" printed them */
        {3064320.6, "3064321"}, {999999.7, "1000000"}, {9999999.4, "9999999"}, /* whole numbers to 7 digits */
        {9999999.6, "1.000e+07"}, {12345678.9, "1.235e+07"}, {1e300, "1.000e+300"}, /* then 4 digits and a power */
        {DBL_MAX, "1.798e+308"}, {INFINITY, "inf"},
    };
    char buf[32];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        eval_format_ppl(cases[i].v, buf, sizeof(buf));
        CHECK(strcmp(buf, cases[i].want) == 0 && strlen(buf) <= EVAL_PPL_WIDTH, "ppl %.17g prints as '%s' (got '%s')",
              cases[i].v, cases[i].want, buf);
    }
    int fits = 1;
    for (double v = 1.23456789; isfinite(v); v *= 10) {
        eval_format_ppl(v, buf, sizeof(buf));
        const double back = strtod(buf, NULL);
        if (strlen(buf) > EVAL_PPL_WIDTH || !(fabs(back - v) <= 5e-4 * v)) {
            fits = 0;
            CHECK(0, "ppl %.17g: '%s' is %zu characters and reads back as %.17g", v, buf, strlen(buf), back);
            break;
        }
    }
    CHECK(fits, "ppl 1.23456789 * 10^k, k = 0..308: at most %d characters, each within 0.05%%", EVAL_PPL_WIDTH);
}

int main(void) {
    make_dir(DIR);
    test_ppl_format();
    test_header_bounds();
    test_losses_from_logits();
    test_v1_valid();
    test_corruptions();
    test_v2();
    test_scoring();
    return test_finish();
}
