/*
 * llmc/evalloader.h: zero-shot eval files, their batching, and llm.c's completion-style scoring.
 *
 * Defines:
 *   EvalFile, evalfile_read   parse and validate a version-1 (llm.c's HellaSwag format, doc/formats.md
 *                             "Eval files and scoring") or version-2 (ours, doc/evals.md) file; 0 plus one error line
 *                             "<file>: <field>: <what was expected>" on any problem
 *   evalfile_load / _free     the same, dying on error
 *   evalfile_check_vocab      every token id of a read file below the model's vocabulary size
 *   eval_model_vocab_ok       the eval files are GPT-2-tokenized: a model must have V = 50257
 *   EvalExample, eval_row     one item; its option r is the row context[r or 0] + completion[r or 0]
 *   evalfile_check_shape      the first of n examples that needs more than B rows or T positions
 *   EvalBatch, eval_batch_pack  consecutive whole examples packed into the rows of a (B, T) batch;
 *                             targets are -1 where nothing is scored
 *   EvalResults, eval_run(_range)  score examples through a forward callback: per-option
 *                             losses, predictions and the task totals (acc, acc_norm, greedy acc)
 *   eval_losses_from_logits   per-position losses (and argmax) for a forward callback that has logits
 *   evalfile_uses_norm        whether the task has per-option completions (acc_norm reported)
 *
 * Scoring (doc/formats.md "Eval files and scoring"). A row holds its context and then its completion; position p predicts
 * token p + 1, so the completion's j-th token is scored at position ctx_len - 1 + j and a row
 * needs ctx_len + completion_len - 1 input positions. Each option's loss is the cross-entropy
 * summed over its completion tokens: acc takes the option with the lowest sum, acc_norm the lowest
 * mean (llm.c's argmin; the first option wins an exact tie). Greedy examples (LAMBADA) are
 * correct when every completion token is the argmax of its logits row (first maximum on a tie).
 * Padding follows the scored positions, so causal attention keeps it out of every score, and a
 * batch only needs as many positions as its longest row: eval_batch_pack trims T to that.
 *
 * The forward pass is a callback, so the CPU evaluator, the CPU trainer's -h 1 and a GPU build
 * share this file. Header-only, C11 and C++17.
 */
#ifndef LLMC_EVALLOADER_H
#define LLMC_EVALLOADER_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "utils.h"

#define EVAL_MAGIC 20240522
#define EVAL_DELIMITER 65535
#define EVAL_MAX_ROWS 16         /* options per example (version 2) */
#define EVAL_V1_COMPLETIONS 4    /* llm.c asserts exactly 4 */
#define EVAL_NAME_SLOT 8         /* version 2: header[8..15] = task name, 32 ASCII bytes */
#define EVAL_NAME_BYTES 32
#define EVAL_PAD_TOKEN 50256     /* <|endoftext|>: fills unused positions and rows */
#define EVAL_VOCAB 50257         /* every eval file holds GPT-2 token ids */

typedef enum { EVAL_SCORE_CHOICE = 0, EVAL_SCORE_GREEDY = 1 } EvalScoring;

typedef struct {
    int index, label;
    int n_ctx, n_comp, n_rows; /* n_ctx and n_comp are each 1 (shared) or n_rows */
    const uint16_t *ctx[EVAL_MAX_ROWS], *comp[EVAL_MAX_ROWS];
    int ctx_len[EVAL_MAX_ROWS], comp_len[EVAL_MAX_ROWS];
} EvalExample;

typedef struct {
    char path[4096];
    char name[EVAL_NAME_BYTES + 1]; /* version 2's task name; "" in version 1 */
    int version, scoring, num_examples, longest_example_bytes, max_rows;
    uint16_t *words; /* the example stream, which the examples point into */
    EvalExample *ex;
} EvalFile;

/* Row r of an example: its context and completion (either may be shared by all rows). */
static inline void eval_row(const EvalExample *e, int r, const uint16_t **ctx, int *ctx_len,
                            const uint16_t **comp, int *comp_len) {
    const int c = e->n_ctx > 1 ? r : 0, k = e->n_comp > 1 ? r : 0;
    *ctx = e->ctx[c];
    *ctx_len = e->ctx_len[c];
    *comp = e->comp[k];
    *comp_len = e->comp_len[k];
}

/* Input positions row r needs: every token but the last is an input. */
static inline int eval_row_positions(const EvalExample *e, int r) {
    const int c = e->n_ctx > 1 ? r : 0, k = e->n_comp > 1 ? r : 0;
    return e->ctx_len[c] + e->comp_len[k] - 1;
}

static inline int eval_example_positions(const EvalExample *e) {
    int m = 0;
    for (int r = 0; r < e->n_rows; r++) m = LLMC_MAX(m, eval_row_positions(e, r));
    return m;
}

/* ----------------------------------------------------------------------------------------------
 * Reading. Every check names the file, the example and the field; the reader never trusts a
 * length before checking it against what is left of the file. */

#define EVAL_FAIL(...)                      \
    do {                                    \
        snprintf(err, err_cap, __VA_ARGS__); \
        return 0;                           \
    } while (0)

/* A cursor over the uint16 stream of one file. */
typedef struct {
    const uint16_t *w;
    size_t n, pos;
} EvalCursor_;

static inline int eval_take_(EvalCursor_ *c, size_t k, const uint16_t **out) {
    if (c->pos + k > c->n) return 0;
    *out = c->w + c->pos;
    c->pos += k;
    return 1;
}

/* One length-prefixed token sequence. */
static inline int eval_read_seq_(EvalCursor_ *cur, const char *path, int idx, const char *what,
                                 int j, const uint16_t **toks, int *len, char *err, size_t err_cap) {
    const uint16_t *p;
    if (!eval_take_(cur, 1, &p)) EVAL_FAIL("%s: example %d: %s %d length: file ends early (truncated)", path, idx, what, j);
    *len = p[0];
    if (*len < 1) EVAL_FAIL("%s: example %d: %s %d length 0: expected >= 1 token", path, idx, what, j);
    if (!eval_take_(cur, (size_t)*len, toks)) {
        EVAL_FAIL("%s: example %d: %s %d: %d tokens announced, file ends early (truncated)", path, idx, what, j, *len);
    }
    return 1;
}

/* The counts of one example (after delimiter, bytes, index, label, num_completions, and in
 * version 2 num_contexts) against the file's version and scoring kind. */
static inline int eval_check_counts_(const EvalFile *ef, int idx, EvalExample *e, char *err, size_t err_cap) {
    const char *path = ef->path;
    if (ef->version == 1) {
        if (e->n_comp != EVAL_V1_COMPLETIONS) {
            EVAL_FAIL("%s: example %d: num_completions %d: expected %d in a version-1 file", path, idx, e->n_comp,
                      EVAL_V1_COMPLETIONS);
        }
        e->n_ctx = 1;
    }
    if (e->n_comp < 1 || e->n_comp > EVAL_MAX_ROWS || e->n_ctx < 1 || e->n_ctx > EVAL_MAX_ROWS) {
        EVAL_FAIL("%s: example %d: num_completions %d, num_contexts %d: expected each in [1, %d]", path, idx,
                  e->n_comp, e->n_ctx, EVAL_MAX_ROWS);
    }
    e->n_rows = LLMC_MAX(e->n_ctx, e->n_comp);
    if ((e->n_ctx != 1 && e->n_ctx != e->n_rows) || (e->n_comp != 1 && e->n_comp != e->n_rows)) {
        EVAL_FAIL("%s: example %d: num_contexts %d, num_completions %d: expected each to be 1 or the same count",
                  path, idx, e->n_ctx, e->n_comp);
    }
    if (ef->scoring == EVAL_SCORE_GREEDY && e->n_rows != 1) {
        EVAL_FAIL("%s: example %d: %d options: a greedy example has one context and one continuation", path, idx,
                  e->n_rows);
    }
    if (ef->scoring == EVAL_SCORE_CHOICE && e->n_rows < 2) {
        EVAL_FAIL("%s: example %d: 1 option: a choice example needs 2 or more", path, idx);
    }
    if (e->label < 0 || e->label >= e->n_rows) {
        EVAL_FAIL("%s: example %d: label %d: expected an option index in [0, %d)", path, idx, e->label, e->n_rows);
    }
    return 1;
}

static inline int eval_parse_example_(EvalFile *ef, EvalCursor_ *cur, int idx, char *err, size_t err_cap) {
    const char *path = ef->path;
    EvalExample *e = &ef->ex[idx];
    const size_t start = cur->pos;
    const uint16_t *h;
    const int nh = ef->version == 1 ? 5 : 6;
    if (!eval_take_(cur, (size_t)nh, &h)) EVAL_FAIL("%s: example %d: header: file ends early (truncated)", path, idx);
    if (h[0] != EVAL_DELIMITER) EVAL_FAIL("%s: example %d: delimiter %d: expected %d", path, idx, h[0], EVAL_DELIMITER);
    if (h[2] != (uint16_t)idx) {
        EVAL_FAIL("%s: example %d: example_index %d: expected %d (examples stored in order)", path, idx, h[2], idx);
    }
    memset(e, 0, sizeof(*e));
    e->index = idx;
    e->label = h[3];
    e->n_comp = h[4];
    e->n_ctx = ef->version == 2 ? h[5] : 1;
    if (!eval_check_counts_(ef, idx, e, err, err_cap)) return 0;
    for (int j = 0; j < e->n_ctx; j++) {
        if (!eval_read_seq_(cur, path, idx, "context", j, &e->ctx[j], &e->ctx_len[j], err, err_cap)) return 0;
    }
    for (int j = 0; j < e->n_comp; j++) {
        if (!eval_read_seq_(cur, path, idx, "completion", j, &e->comp[j], &e->comp_len[j], err, err_cap)) return 0;
    }
    const size_t nbytes = 2 * (cur->pos - start);
    if (h[1] != nbytes) EVAL_FAIL("%s: example %d: example_bytes %d: the fields add up to %zu", path, idx, h[1], nbytes);
    if ((int)nbytes > ef->longest_example_bytes) {
        EVAL_FAIL("%s: example %d: %zu bytes: header[3] longest_example_bytes says at most %d", path, idx, nbytes,
                  ef->longest_example_bytes);
    }
    ef->max_rows = LLMC_MAX(ef->max_rows, e->n_rows);
    return 1;
}

static inline int eval_parse_header_(EvalFile *ef, const int32_t *h, char *err, size_t err_cap) {
    const char *path = ef->path;
    if (h[0] != EVAL_MAGIC) EVAL_FAIL("%s: header[0] magic %d: expected %d (an llm.c eval file)", path, h[0], EVAL_MAGIC);
    if (h[1] != 1 && h[1] != 2) EVAL_FAIL("%s: header[1] version %d: expected 1 or 2", path, h[1]);
    if (h[2] < 1 || h[2] > 65535) EVAL_FAIL("%s: header[2] num_examples %d: expected 1..65535", path, h[2]);
    if (h[3] < 1 || h[3] > 65535) EVAL_FAIL("%s: header[3] longest_example_bytes %d: expected 1..65535", path, h[3]);
    ef->version = h[1];
    ef->num_examples = h[2];
    ef->longest_example_bytes = h[3];
    ef->scoring = EVAL_SCORE_CHOICE;
    ef->name[0] = '\0';
    if (ef->version == 2) {
        if (h[4] != EVAL_SCORE_CHOICE && h[4] != EVAL_SCORE_GREEDY) {
            EVAL_FAIL("%s: header[4] scoring %d: expected 0 (choice) or 1 (greedy)", path, h[4]);
        }
        if (h[5] < 1 || h[5] > EVAL_MAX_ROWS) EVAL_FAIL("%s: header[5] max options %d: expected 1..%d", path, h[5], EVAL_MAX_ROWS);
        ef->scoring = h[4];
        memcpy(ef->name, h + EVAL_NAME_SLOT, EVAL_NAME_BYTES);
        ef->name[EVAL_NAME_BYTES] = '\0';
    }
    return 1;
}

/* One token sequence of example i (its k-th context or completion) below vocab_size. */
static inline int eval_check_seq_(const uint16_t *toks, int len, const char *path, int i, const char *what, int k,
                                  int vocab_size, char *err, size_t err_cap) {
    for (int t = 0; t < len; t++) {
        if (toks[t] >= vocab_size) {
            EVAL_FAIL("%s: example %d: %s %d token %d = %d: expected < vocab size %d", path, i, what, k, t, toks[t],
                      vocab_size);
        }
    }
    return 1;
}

/* The eval files hold GPT-2 BPE token ids (the dev/data writers): a model of another vocabulary (a byte
 * model, V 256) would read them as different tokens, so it is refused, not scored. Returns 1 for
 * V = 50257; else writes one line naming `model` (the checkpoint or descriptor) to err. */
static inline int eval_model_vocab_ok(const char *model, int V, char *err, size_t err_cap) {
    if (V == EVAL_VOCAB) return 1;
    snprintf(err, err_cap, "%s: the model's vocabulary V is %d, but the eval files are GPT-2-tokenized "
             "(V = %d): only a GPT-2-vocabulary model can be scored", model, V, EVAL_VOCAB);
    return 0;
}

/* Every token id of a parsed file below vocab_size: the model's vocabulary is known only once it
 * is built, after the files are read (eval_main), so this check stands on its own. */
static inline int evalfile_check_vocab(const EvalFile *ef, int vocab_size, char *err, size_t err_cap) {
    for (int i = 0; i < ef->num_examples; i++) {
        const EvalExample *e = &ef->ex[i];
        for (int k = 0; k < e->n_ctx; k++) {
            if (!eval_check_seq_(e->ctx[k], e->ctx_len[k], ef->path, i, "context", k, vocab_size, err, err_cap)) return 0;
        }
        for (int k = 0; k < e->n_comp; k++) {
            if (!eval_check_seq_(e->comp[k], e->comp_len[k], ef->path, i, "completion", k, vocab_size, err, err_cap)) {
                return 0;
            }
        }
    }
    return 1;
}

/* Reads and validates the whole file. vocab_size > 0 also checks every token id against it. */
static inline int evalfile_read(EvalFile *ef, const char *path, int vocab_size, char *err, size_t err_cap) {
    memset(ef, 0, sizeof(*ef));
    snprintf(ef->path, sizeof(ef->path), "%s", path);
    const int64_t size = file_size_or_neg(path); /* a directory or special file: named, no open */
    FILE *f = fopen(path, "rb");
    if (f == NULL) EVAL_FAIL("%s: cannot open eval file: %s", path, strerror(errno));
    int32_t h[256];
    const size_t got = fread(h, sizeof(int32_t), 256, f);
    if (got != 256 || size < 1024) {
        fclose(f);
        EVAL_FAIL("%s: header: %lld bytes, expected at least the 1024-byte header (truncated?)", path, (long long)size);
    }
    if (!eval_parse_header_(ef, h, err, err_cap)) {
        fclose(f);
        return 0;
    }
    if ((size - 1024) % 2 != 0) {
        fclose(f);
        EVAL_FAIL("%s: body: %lld bytes, expected a whole number of uint16 words", path, (long long)(size - 1024));
    }
    EvalCursor_ cur = {NULL, (size_t)(size - 1024) / 2, 0};
    ef->words = (uint16_t *)xmalloc(cur.n * sizeof(uint16_t));
    const size_t body = fread(ef->words, sizeof(uint16_t), cur.n, f);
    fclose(f);
    cur.w = ef->words;
    ef->ex = (EvalExample *)xcalloc((size_t)ef->num_examples, sizeof(EvalExample));
    int ok = body == cur.n;
    if (!ok) snprintf(err, err_cap, "%s: body: read %zu of %zu words", path, body, cur.n);
    for (int i = 0; ok && i < ef->num_examples; i++) ok = eval_parse_example_(ef, &cur, i, err, err_cap);
    if (ok && cur.pos != cur.n) {
        snprintf(err, err_cap, "%s: body: %zu bytes after the last of header[2] = %d examples: expected none",
                 path, 2 * (cur.n - cur.pos), ef->num_examples);
        ok = 0;
    }
    if (ok && vocab_size > 0) ok = evalfile_check_vocab(ef, vocab_size, err, err_cap);
    if (!ok) {
        free(ef->words);
        free(ef->ex);
        ef->words = NULL;
        ef->ex = NULL;
    }
    return ok;
}

#undef EVAL_FAIL

static inline void evalfile_load(EvalFile *ef, const char *path, int vocab_size) {
    char err[4400];
    if (!evalfile_read(ef, path, vocab_size, err, sizeof(err))) llmc_die("%s", err);
}

static inline void evalfile_free(EvalFile *ef) {
    free(ef->words);
    free(ef->ex);
    ef->words = NULL;
    ef->ex = NULL;
}

/* The first of the first n examples that does not fit a (B, T) batch, or -1. *why gets one
 * sentence (without the file name) saying which limit and by how much. */
static inline int evalfile_check_shape(const EvalFile *ef, int n, int B, int T, char *why, size_t cap) {
    for (int i = 0; i < n; i++) {
        const EvalExample *e = &ef->ex[i];
        if (e->n_rows > B) {
            snprintf(why, cap, "example %d has %d options, one batch row each, but B = %d (use -b %d or more)", i,
                     e->n_rows, B, ef->max_rows);
            return i;
        }
        for (int r = 0; r < e->n_rows; r++) {
            const int need = eval_row_positions(e, r);
            if (need > T) {
                snprintf(why, cap, "example %d option %d needs %d positions (context + completion - 1) but T = %d", i,
                         r, need, T);
                return i;
            }
        }
    }
    return -1;
}

/* ----------------------------------------------------------------------------------------------
 * Batching */

typedef struct {
    int B, T;              /* capacity */
    int T_used;            /* positions of this batch: its longest row; row stride of inputs */
    int first, count;      /* examples [first, first + count) */
    int rows;              /* rows filled; the rest are padding */
    int *inputs, *targets; /* (B, T_used) */
    int *row_example, *row_option; /* (B) */
} EvalBatch;

static inline void eval_batch_init(EvalBatch *b, int B, int T) {
    memset(b, 0, sizeof(*b));
    b->B = B;
    b->T = T;
    b->inputs = (int *)xmalloc((size_t)B * T * sizeof(int));
    b->targets = (int *)xmalloc((size_t)B * T * sizeof(int));
    b->row_example = (int *)xmalloc((size_t)B * sizeof(int));
    b->row_option = (int *)xmalloc((size_t)B * sizeof(int));
}

static inline void eval_batch_free(EvalBatch *b) {
    free(b->inputs);
    free(b->targets);
    free(b->row_example);
    free(b->row_option);
    memset(b, 0, sizeof(*b));
}

/* Packs whole examples first, first + 1, ... (below end) while their options fit in B rows.
 * The examples must have passed evalfile_check_shape. Returns the number packed (>= 1). */
static inline int eval_batch_pack(EvalBatch *b, const EvalFile *ef, int first, int end, int pad_token) {
    int rows = 0, count = 0, T_used = 1;
    while (first + count < end && rows + ef->ex[first + count].n_rows <= b->B) {
        const EvalExample *e = &ef->ex[first + count];
        for (int r = 0; r < e->n_rows; r++, rows++) {
            b->row_example[rows] = first + count;
            b->row_option[rows] = r;
        }
        T_used = LLMC_MAX(T_used, eval_example_positions(e));
        count++;
    }
    if (count == 0) llmc_die("%s: example %d: %d options do not fit B = %d rows", ef->path, first,
                             ef->ex[first].n_rows, b->B);
    b->first = first;
    b->count = count;
    b->rows = rows;
    b->T_used = T_used;
    for (size_t i = 0; i < (size_t)b->B * T_used; i++) {
        b->inputs[i] = pad_token;
        b->targets[i] = -1;
    }
    for (int row = 0; row < rows; row++) {
        const uint16_t *ctx, *comp;
        int nc, nk;
        eval_row(&ef->ex[b->row_example[row]], b->row_option[row], &ctx, &nc, &comp, &nk);
        int *in = b->inputs + (size_t)row * T_used, *tg = b->targets + (size_t)row * T_used;
        /* the row's tokens s[0..nc+nk): inputs s[0..n-1); the target s[p+1] only where it is a
         * completion token (p >= nc - 1), -1 elsewhere, so the forward skips unscored losses */
        for (int p = 0; p < nc + nk - 1; p++) {
            in[p] = p < nc ? ctx[p] : comp[p - nc];
            tg[p] = p + 1 < nc ? -1 : comp[p + 1 - nc];
        }
    }
    return count;
}

/* ----------------------------------------------------------------------------------------------
 * Scoring */

typedef struct {
    double sum_loss; /* cross-entropy summed over the completion tokens (nats) */
    int n_tok;       /* completion tokens */
    int all_argmax;  /* greedy: every completion token is the argmax prediction */
} EvalRowScore;

typedef struct {
    int n;                /* examples scored */
    int scoring;
    int *row_offset;      /* (n + 1): example i's options are rows[row_offset[i] ...] */
    EvalRowScore *rows;
    int *pred_sum, *pred_mean, *label; /* (n) */
    int correct_sum, correct_mean;     /* choice: acc and acc_norm counts; greedy: correct_sum */
    double greedy_loss;                /* greedy: summed continuation loss over all examples */
    long long greedy_tokens;
} EvalResults;

static inline void eval_results_init(EvalResults *res, const EvalFile *ef, int n) {
    memset(res, 0, sizeof(*res));
    res->n = n;
    res->scoring = ef->scoring;
    res->row_offset = (int *)xmalloc(((size_t)n + 1) * sizeof(int));
    res->row_offset[0] = 0;
    for (int i = 0; i < n; i++) res->row_offset[i + 1] = res->row_offset[i] + ef->ex[i].n_rows;
    res->rows = (EvalRowScore *)xcalloc((size_t)res->row_offset[n], sizeof(EvalRowScore));
    res->pred_sum = (int *)xmalloc(((size_t)n + 1) * sizeof(int));
    res->pred_mean = (int *)xmalloc(((size_t)n + 1) * sizeof(int));
    res->label = (int *)xmalloc(((size_t)n + 1) * sizeof(int));
}

static inline void eval_results_free(EvalResults *res) {
    free(res->row_offset);
    free(res->rows);
    free(res->pred_sum);
    free(res->pred_mean);
    free(res->label);
    memset(res, 0, sizeof(*res));
}

/* Index of the largest value of row z (V), the first one on a tie. */
static inline int eval_argmax(const float *z, int V) {
    int best = 0;
    for (int v = 1; v < V; v++)
        if (z[v] > z[best]) best = v;
    return best;
}

/* Per-row scores of a packed batch from the forward's per-position losses (B, T_used) and, for
 * greedy files, the argmax token of each scored position's logits (B, T_used). */
static inline void eval_batch_score(const EvalBatch *b, const EvalFile *ef, const float *losses, const int *argmax,
                                    EvalResults *res) {
    for (int row = 0; row < b->rows; row++) {
        const EvalExample *e = &ef->ex[b->row_example[row]];
        const uint16_t *ctx, *comp;
        int nc, nk;
        eval_row(e, b->row_option[row], &ctx, &nc, &comp, &nk);
        EvalRowScore *s = &res->rows[res->row_offset[e->index] + b->row_option[row]];
        s->sum_loss = 0.0;
        s->n_tok = nk;
        s->all_argmax = 1;
        for (int j = 0; j < nk; j++) {
            const size_t pos = (size_t)row * b->T_used + (size_t)(nc - 1 + j);
            s->sum_loss += (double)losses[pos];
            if (ef->scoring == EVAL_SCORE_GREEDY && argmax[pos] != comp[j]) s->all_argmax = 0;
        }
    }
}

/* Predictions and tallies of example i once all its rows are scored. */
static inline void eval_example_finish(const EvalFile *ef, int i, EvalResults *res) {
    const EvalExample *e = &ef->ex[i];
    const EvalRowScore *s = res->rows + res->row_offset[i];
    int ps = 0, pm = 0;
    for (int r = 1; r < e->n_rows; r++) {
        if (s[r].sum_loss < s[ps].sum_loss) ps = r;
        if (s[r].sum_loss / s[r].n_tok < s[pm].sum_loss / s[pm].n_tok) pm = r;
    }
    res->label[i] = e->label;
    if (ef->scoring == EVAL_SCORE_GREEDY) {
        res->pred_sum[i] = res->pred_mean[i] = s[0].all_argmax ? 0 : -1;
        res->correct_sum += s[0].all_argmax;
        res->greedy_loss += s[0].sum_loss;
        res->greedy_tokens += s[0].n_tok;
        return;
    }
    res->pred_sum[i] = ps;
    res->pred_mean[i] = pm;
    res->correct_sum += ps == e->label;
    res->correct_mean += pm == e->label;
}

/* The forward pass: tokens (B, T) in, per-position losses (B, T) out and, when need_argmax is set
 * (greedy files), the index of the largest logit at each position (B, T), all row-major with row
 * stride T. B and T may be below the batch capacity (the filled rows, the longest row). Only
 * positions with targets >= 0 are scored (a completion token follows); the callback may leave
 * every other position unset. Argmax rather than logits, so that a GPU forward returns 4 bytes
 * per scored position instead of a vocabulary row per position. */
typedef void (*EvalForwardFn)(void *ctx, const int *inputs, const int *targets, int B, int T, int need_argmax,
                              const float **losses, const int **argmax);

/* For a forward that yields logits (N, V): the loss log(sum_v exp z_v) - z_target at each scored
 * position (targets >= 0; 0 elsewhere), the max subtracted first and the sum in double, so the
 * value matches PyTorch's float32 cross_entropy to ~1e-6 relative; with argmax non-NULL also the
 * first index of the largest logit there (-1 elsewhere). */
static inline void eval_losses_from_logits(const float *logits, const int *targets, int N, int V, float *losses,
                                           int *argmax) {
#pragma omp parallel for schedule(dynamic, 4)
    for (int i = 0; i < N; i++) {
        losses[i] = 0.0f;
        if (argmax) argmax[i] = -1;
        if (targets[i] < 0) continue;
        const float *z = logits + (size_t)i * V;
        const int best = eval_argmax(z, V);
        const float mx = z[best];
        double sum = 0.0;
        for (int v = 0; v < V; v++) sum += exp((double)(z[v] - mx));
        losses[i] = (float)(log(sum) + (double)mx - (double)z[targets[i]]);
        if (argmax) argmax[i] = best;
    }
}

/* Scores examples [lo, hi) into res (initialized for at least hi examples); the caller has run
 * evalfile_check_shape for B, T. Callers that report progress call this in chunks. */
static inline void eval_run_range(const EvalFile *ef, int lo, int hi, int B, int T, int V, EvalForwardFn fwd,
                                  void *ctx, EvalResults *res) {
    EvalBatch b;
    eval_batch_init(&b, B, T);
    const int pad = LLMC_MIN(EVAL_PAD_TOKEN, V - 1);
    for (int first = lo; first < hi;) {
        const int count = eval_batch_pack(&b, ef, first, hi, pad);
        const float *losses = NULL;
        const int *argmax = NULL;
        /* only the filled rows: a short last batch costs less */
        fwd(ctx, b.inputs, b.targets, b.rows, b.T_used, ef->scoring == EVAL_SCORE_GREEDY, &losses, &argmax);
        eval_batch_score(&b, ef, losses, argmax, res);
        for (int i = first; i < first + count; i++) eval_example_finish(ef, i, res);
        first += count;
    }
    eval_batch_free(&b);
}

/* Scores the first n examples. */
static inline void eval_run(const EvalFile *ef, int n, int B, int T, int V, EvalForwardFn fwd, void *ctx,
                            EvalResults *res) {
    eval_results_init(res, ef, n);
    eval_run_range(ef, 0, n, B, T, V, fwd, ctx, res);
}

/* Whether acc_norm means anything: some example has its own completion per option (with one
 * shared continuation, as WinoGrande, the mean and the sum rank the options alike). */
static inline int evalfile_uses_norm(const EvalFile *ef) {
    if (ef->scoring != EVAL_SCORE_CHOICE) return 0;
    for (int i = 0; i < ef->num_examples; i++)
        if (ef->ex[i].n_comp > 1) return 1;
    return 0;
}

/* The examples a task counts as correct in its headline number: acc_norm where the task uses it
 * (llm.c's HellaSwag number), acc otherwise, last-word accuracy for greedy files. */
static inline int eval_headline_correct(const EvalFile *ef, const EvalResults *res) {
    return evalfile_uses_norm(ef) ? res->correct_mean : res->correct_sum;
}

/* ----------------------------------------------------------------------------------------------
 * The tasks the writers in dev/data produce, by name (eval_gpt2 -tasks, the trainers' -ht). */
typedef struct {
    const char *name;   /* hellaswag, piqa, ... */
    const char *file;   /* relative to dev/data */
    const char *writer; /* the script that writes it */
} EvalTask;

static const EvalTask EVAL_TASKS[] = {
    {"hellaswag", "hellaswag/hellaswag_val.bin", "dev/data/hellaswag.py"},
    {"piqa", "piqa/piqa_val.bin", "dev/data/piqa.py"},
    {"arc_easy", "arc_easy/arc_easy_test.bin", "dev/data/arc_easy.py"},
    {"winogrande", "winogrande/winogrande_val.bin", "dev/data/winogrande.py"},
    {"lambada", "lambada/lambada_test.bin", "dev/data/lambada.py"},
};
#define NUM_EVAL_TASKS ((int)(sizeof(EVAL_TASKS) / sizeof(EVAL_TASKS[0])))

static inline const EvalTask *eval_task_find(const char *name) {
    for (int i = 0; i < NUM_EVAL_TASKS; i++)
        if (strcmp(EVAL_TASKS[i].name, name) == 0) return &EVAL_TASKS[i];
    return NULL;
}

#endif /* LLMC_EVALLOADER_H */
