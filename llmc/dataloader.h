/*
 * llmc/dataloader.h: llm.c token shards and the distributed data loader (doc/formats.md "Token shards", "DataLoader semantics").
 *
 * Defines:
 *   shard_validate        check one shard's header and size; returns its token count
 *   DataLoader            B x T batches from a sorted glob of shards, rank r reading slice r of
 *                         every nproc*B*T window; optional shuffling with llm.c's exact order
 *   dataloader_init / _reset / _next_batch / _resume / _free
 *   dataloader_set_seed   another shuffle seed than llm.c's 42 (-data_seed)
 *   dataloader_set_rows   independent rows (-rows 1): each of the B rows its own window of T + 1
 *                         tokens, drawn from a seeded permutation of all such windows
 *   dataloader_write_shuffle / dataloader_read_shuffle / dataloader_shuffle_bytes
 *                         the permutation part of a state file (doc/formats.md "Optimizer/DataLoader state")
 *   dataloader_val_batches  -m: the val batches each evaluation takes
 *
 * The order of samples must equal llm.c's so that loss curves compare step by step: shard order
 * permuted at every reset (from the previous order), sample order inside a shard re-permuted from
 * the identity at every shard load, both with mt19937 seeded 42 + rank.
 *
 * llm.c's batch is one contiguous span of B*T + 1 tokens, so its B rows are consecutive pieces of
 * one passage and their gradients are correlated. With rows on, the unit the permutation orders is
 * a row window of T + 1 tokens starting at a multiple of T, and batch i of rank r takes the entries
 * (i * nproc + r) * B .. + B of it: every row comes from another place of the shard, and the ranks
 * read disjoint rows (the permutation is the same on every rank, seeded without the rank). Shards
 * are visited in the same permuted order as llm.c's (doc/formats.md "DataLoader semantics").
 */
#ifndef LLMC_DATALOADER_H
#define LLMC_DATALOADER_H

#include <glob.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "rand.h"
#include "utils.h"

#define SHARD_MAGIC 20240520
#define SHARD_VERSION 1
#define LLAMA3_SHARD_MAGIC 20240801

/* Validates header and size; dies with one line naming the file and field. */
static inline int64_t shard_validate(const char *path) {
    int64_t size = file_size_or_neg(path);
    if (size < 0) llmc_die("%s: cannot open token shard: %s", path, strerror(errno));
    if (size < 1024) {
        llmc_die("%s: %lld bytes, shorter than the 1024-byte shard header (truncated?)", path,
                 (long long)size);
    }
    int32_t h[256];
    FILE *f = xfopen(path, "rb");
    xfread(h, sizeof(int32_t), 256, f, path, "shard header");
    xfclose(f, path);
    if (h[0] == LLAMA3_SHARD_MAGIC) {
        llmc_die("%s: header[0] = %d is a Llama-3 shard (uint32 tokens); expected a GPT-2 shard "
                 "(magic %d)", path, h[0], SHARD_MAGIC);
    }
    if (h[0] != SHARD_MAGIC) {
        llmc_die("%s: bad magic %d in header[0]: expected %d (an llm.c token shard)", path, h[0],
                 SHARD_MAGIC);
    }
    if (h[1] != SHARD_VERSION) {
        llmc_die("%s: unsupported version %d in header[1]: expected %d", path, h[1], SHARD_VERSION);
    }
    int64_t ntok = h[2];
    if (ntok < 0 || size != 1024 + 2 * ntok) {
        llmc_die("%s: header[2] says %lld tokens = %lld bytes, but the file is %lld bytes "
                 "(truncated or corrupt)", path, (long long)ntok, (long long)(1024 + 2 * ntok),
                 (long long)size);
    }
    return ntok;
}

typedef struct {
    int rank, nproc, B, T, vocab_size;
    int should_shuffle;
    int rows;                  /* 1: independent rows (dataloader_set_rows); 0: llm.c's spans */
    uint32_t seed;             /* the shuffle seed: 42 (llm.c) or dataloader_set_seed's */
    glob_t glob;
    int n_files;
    int64_t total_tokens;      /* over all shards */
    int64_t max_samples;       /* the longest sample order of any shard (windows, or rows) */
    int64_t total_samples;     /* batches over all shards: one epoch */
    /* position */
    int64_t current_shard_idx; /* index into the shard order */
    int64_t current_sample_idx; /* the next batch of the current shard */
    int64_t shard_num_samples;  /* batches in the current shard */
    int64_t shard_order_len;    /* entries of its sample order: windows, or rows with rows on */
    FILE *f;
    const char *current_path;
    /* shuffling */
    Mt19937 shuffle_rng;
    int32_t *shard_indices;       /* (n_files) shard order */
    int32_t *intra_shard_indices; /* (max_samples) sample order in the current shard */
    int64_t restored_samples;     /* entry count of a restored sample order, checked on resume; -1 */
    /* outputs */
    uint16_t *buffer; /* (B*T + 1) */
    int *inputs;      /* (B*T) */
    int *targets;     /* (B*T) */
} DataLoader;

static inline int64_t dl_window_tokens(const DataLoader *dl) {
    return (int64_t)dl->nproc * dl->B * dl->T;
}

/* The entries of a shard's sample order: its windows of nproc*B*T tokens, or with rows on its
 * row windows of T (+ 1) tokens; the last token of a window is only a target, and the tail that
 * fills no window is dropped. */
static inline int64_t dl_order_len_(const DataLoader *dl, int64_t ntok) {
    return (ntok - 1) / (dl->rows ? (int64_t)dl->T : dl_window_tokens(dl));
}

/* The batches of a shard: one per window, or one per nproc*B rows (the rest of an epoch's
 * permutation is left out of that epoch). */
static inline int64_t dl_batches_(const DataLoader *dl, int64_t ntok) {
    const int64_t n = dl_order_len_(dl, ntok);
    return dl->rows ? n / ((int64_t)dl->nproc * dl->B) : n;
}

static inline void dl_load_shard_(DataLoader *dl, int64_t idx) {
    int64_t file = dl->should_shuffle ? dl->shard_indices[idx] : idx;
    const char *path = dl->glob.gl_pathv[file];
    if (dl->f != NULL) xfclose(dl->f, dl->current_path);
    int64_t ntok = shard_validate(path); /* also catches a shard replaced since init */
    dl->f = xfopen(path, "rb");
    dl->current_path = path;
    dl->shard_num_samples = dl_batches_(dl, ntok);
    dl->shard_order_len = dl_order_len_(dl, ntok);
}

static inline void dl_prepare_intra_shard_(DataLoader *dl) {
    perm_identity(dl->intra_shard_indices, dl->shard_order_len);
    perm_shuffle(dl->intra_shard_indices, dl->shard_order_len, &dl->shuffle_rng);
}

static inline void dataloader_reset(DataLoader *dl) {
    dl->current_shard_idx = 0;
    dl->current_sample_idx = 0;
    if (dl->should_shuffle) perm_shuffle(dl->shard_indices, dl->n_files, &dl->shuffle_rng);
    dl_load_shard_(dl, 0);
    if (dl->should_shuffle) dl_prepare_intra_shard_(dl);
}

/* The sizes of every shard in the current mode, and the sample-order buffer for the longest one.
 * Every shard must hold at least one batch: nproc*B*T + 1 tokens in either mode (nproc*B rows of
 * T + 1 tokens at multiples of T need exactly as many). */
static inline void dl_count_(DataLoader *dl) {
    dl->total_tokens = dl->max_samples = dl->total_samples = 0;
    for (int i = 0; i < dl->n_files; i++) {
        const char *path = dl->glob.gl_pathv[i];
        int64_t ntok = shard_validate(path);
        if (dl_batches_(dl, ntok) < 1) {
            llmc_die("%s: %lld tokens, fewer than one window of nproc*B*T + 1 = %lld (lower -b/-t)",
                     path, (long long)ntok, (long long)dl_window_tokens(dl) + 1);
        }
        if (dl_order_len_(dl, ntok) > 0x7fffffff) llmc_die("%s: %lld tokens: more windows than a 32-bit sample order holds", path, (long long)ntok);
        dl->total_tokens += ntok;
        dl->max_samples = LLMC_MAX(dl->max_samples, dl_order_len_(dl, ntok));
        dl->total_samples += dl_batches_(dl, ntok);
    }
    free(dl->intra_shard_indices);
    dl->intra_shard_indices = (int32_t *)xmalloc((size_t)dl->max_samples * sizeof(int32_t));
}

/* The shuffle seed: the loader as dataloader_init leaves it, with mt19937 seeded seed + rank
 * instead of llm.c's 42 + rank (the trainers' -data_seed); with rows on, seed alone, so that
 * every rank draws the same permutation and reads its own part of it. */
static inline void dataloader_set_seed(DataLoader *dl, uint32_t seed) {
    dl->seed = seed;
    perm_identity(dl->shard_indices, dl->n_files);
    mt_seed(&dl->shuffle_rng, seed + (dl->rows ? 0u : (uint32_t)dl->rank));
    dataloader_reset(dl);
}

/* -rows: 1 gives every row of a batch its own window (see the top of this file), 0 llm.c's
 * contiguous spans. Restarts the loader from the beginning with its seed. */
static inline void dataloader_set_rows(DataLoader *dl, int rows) {
    dl->rows = rows ? 1 : 0;
    dl_count_(dl);
    dataloader_set_seed(dl, dl->seed);
}

/* pattern: a glob of shard files (sorted). Every shard must hold at least one window. The loader
 * starts as llm.c's: contiguous spans, seed 42. */
static inline void dataloader_init(DataLoader *dl, const char *pattern, int B, int T, int rank,
                                   int nproc, int should_shuffle, int vocab_size) {
    memset(dl, 0, sizeof(*dl));
    dl->rank = rank;
    dl->nproc = nproc;
    dl->B = B;
    dl->T = T;
    dl->vocab_size = vocab_size;
    dl->should_shuffle = should_shuffle;
    dl->restored_samples = -1;
    int rc = glob(pattern, 0, NULL, &dl->glob);
    if (rc != 0 || dl->glob.gl_pathc == 0) {
        char cwd[4096] = "?";
        if (pattern[0] != '/' && getcwd(cwd, sizeof(cwd)) == NULL) snprintf(cwd, sizeof(cwd), "?");
        if (pattern[0] == '/') llmc_die("%s: no file matches this shard pattern (make data writes TinyShakespeare's; check -i/-j)", pattern);
        llmc_die("%s: no file matches this shard pattern, relative to the working directory %s (make data "
                 "writes TinyShakespeare's; check -i/-j)", pattern, cwd);
    }
    if (dl->glob.gl_pathc > 0x7fffffff) llmc_die("%s: too many shards", pattern);
    dl->n_files = (int)dl->glob.gl_pathc;
    dl->buffer = (uint16_t *)xmalloc(((size_t)B * T + 1) * sizeof(uint16_t));
    dl->inputs = (int *)xmalloc((size_t)B * T * sizeof(int));
    dl->targets = (int *)xmalloc((size_t)B * T * sizeof(int));
    dl->shard_indices = (int32_t *)xmalloc((size_t)dl->n_files * sizeof(int32_t));
    dl_count_(dl);
    dl->seed = 42;
    dataloader_set_seed(dl, 42);
}

/* Reads n + 1 tokens from token offset tok_off of the current shard into inputs / targets
 * (n each, shifted by one). */
static inline void dl_read_span_(DataLoader *dl, int64_t tok_off, size_t n, int *inputs, int *targets) {
    xfseek(dl->f, 1024 + 2 * tok_off, dl->current_path);
    xfread(dl->buffer, sizeof(uint16_t), n + 1, dl->f, dl->current_path, "tokens");
    for (size_t i = 0; i <= n; i++) {
        if (dl->buffer[i] >= dl->vocab_size) {
            llmc_die("%s: token %u at position %lld is outside the vocabulary [0, %d)",
                     dl->current_path, dl->buffer[i], (long long)(tok_off + (int64_t)i),
                     dl->vocab_size);
        }
    }
    for (size_t i = 0; i < n; i++) {
        inputs[i] = dl->buffer[i];
        targets[i] = dl->buffer[i + 1];
    }
}

static inline int64_t dl_order_at_(const DataLoader *dl, int64_t i) {
    return dl->should_shuffle ? dl->intra_shard_indices[i] : i;
}

static inline void dl_load_batch_(DataLoader *dl) {
    if (!dl->rows) { /* llm.c: the rank's slice of one window of nproc*B*T + 1 tokens */
        const int64_t sample = dl_order_at_(dl, dl->current_sample_idx);
        const int64_t tok_off = sample * dl_window_tokens(dl) + (int64_t)dl->rank * dl->B * dl->T;
        dl_read_span_(dl, tok_off, (size_t)dl->B * dl->T, dl->inputs, dl->targets);
        return;
    }
    const int64_t first = (dl->current_sample_idx * dl->nproc + dl->rank) * dl->B; /* this rank's rows */
    for (int b = 0; b < dl->B; b++) {
        const size_t at = (size_t)b * dl->T;
        dl_read_span_(dl, dl_order_at_(dl, first + b) * dl->T, (size_t)dl->T, dl->inputs + at, dl->targets + at);
    }
}

static inline void dl_advance_(DataLoader *dl) {
    if (dl->current_shard_idx == dl->n_files - 1) { /* end of epoch */
        dataloader_reset(dl);
        return;
    }
    dl->current_shard_idx++;
    dl->current_sample_idx = 0;
    dl_load_shard_(dl, dl->current_shard_idx);
    if (dl->should_shuffle) dl_prepare_intra_shard_(dl);
}

/* Fills dl->inputs / dl->targets with the next (B, T) batch. */
static inline void dataloader_next_batch(DataLoader *dl) {
    if (dl->current_sample_idx >= dl->shard_num_samples) dl_advance_(dl);
    dl_load_batch_(dl);
    dl->current_sample_idx++;
}

/* Continue from a saved position. With shuffling, call dataloader_read_shuffle first: the shard
 * order decides which file the position refers to. */
static inline void dataloader_resume(DataLoader *dl, int64_t shard_idx, int64_t sample_idx,
                                     const char *state_path) {
    if (shard_idx < 0 || shard_idx >= dl->n_files) {
        llmc_die("%s: current_shard_idx %lld, but the pattern matches %d shards", state_path,
                 (long long)shard_idx, dl->n_files);
    }
    dl->current_shard_idx = shard_idx;
    dl->current_sample_idx = sample_idx;
    dl_load_shard_(dl, shard_idx);
    if (sample_idx < 0 || sample_idx > dl->shard_num_samples) {
        llmc_die("%s: current_sample_idx %lld, but the shard holds %lld samples", state_path,
                 (long long)sample_idx, (long long)dl->shard_num_samples);
    }
    if (dl->should_shuffle && dl->restored_samples != dl->shard_order_len) {
        llmc_die("%s: the saved sample order has %lld entries; the shard now holds %lld %s "
                 "(different data or -b/-t?)", state_path, (long long)dl->restored_samples,
                 (long long)dl->shard_order_len, dl->rows ? "rows" : "samples");
    }
}

/* State-file part (doc/formats.md "Optimizer/DataLoader state"): size_t n, int32 shard order; size_t m, int32 sample order
 * (of windows, or of rows with rows on); the raw 2520-byte mt19937. */
static inline void dataloader_write_shuffle(const DataLoader *dl, AtomicFile *af) {
    size_t n = (size_t)dl->n_files, m = (size_t)dl->shard_order_len;
    atomic_write(af, &n, sizeof(size_t), 1);
    atomic_write(af, dl->shard_indices, sizeof(int32_t), n);
    atomic_write(af, &m, sizeof(size_t), 1);
    atomic_write(af, dl->intra_shard_indices, sizeof(int32_t), m);
    atomic_write(af, &dl->shuffle_rng, sizeof(Mt19937), 1);
}

/* The bytes dataloader_write_shuffle writes for a sample order of m entries. */
static inline int64_t dataloader_shuffle_bytes(const DataLoader *dl, int64_t m) {
    return (int64_t)sizeof(size_t) + 4 * (int64_t)dl->n_files + (int64_t)sizeof(size_t) + 4 * m +
           (int64_t)sizeof(Mt19937);
}

/* 1 if p[0..n) holds every value of 0..n-1 once; else 0 with the first bad entry in *bad. */
static inline int dl_is_permutation_(const int32_t *p, int64_t n, int64_t *bad) {
    unsigned char *seen = (unsigned char *)xcalloc((size_t)(n > 0 ? n : 1), 1);
    int ok = 1;
    for (int64_t i = 0; i < n && ok; i++) {
        if (p[i] < 0 || p[i] >= n || seen[p[i]]) {
            *bad = i;
            ok = 0;
        } else {
            seen[p[i]] = 1;
        }
    }
    free(seen);
    return ok;
}

/* Reads what dataloader_write_shuffle wrote. The shard order must be a permutation of the
 * pattern's shards and the sample order one of 0..m-1 (m at most the largest shard's sample
 * count; dataloader_resume checks it against the shard it resumes in): the orders steer every
 * read of the data, so a state file never points a read outside it. */
static inline void dataloader_read_shuffle(DataLoader *dl, FILE *f, const char *path) {
    size_t n = 0, m = 0;
    int64_t bad = 0;
    xfread(&n, sizeof(size_t), 1, f, path, "loader shard count");
    if (n != (size_t)dl->n_files) {
        llmc_die("%s: the state was saved with %zu shards; the pattern now matches %d", path, n,
                 dl->n_files);
    }
    xfread(dl->shard_indices, sizeof(int32_t), n, f, path, "loader shard order");
    if (!dl_is_permutation_(dl->shard_indices, (int64_t)n, &bad)) {
        llmc_die("%s: loader shard order entry %lld = %d: expected a permutation of 0..%zu", path,
                 (long long)bad, dl->shard_indices[bad], n - 1);
    }
    xfread(&m, sizeof(size_t), 1, f, path, "loader sample count");
    if (m > (size_t)dl->max_samples) {
        llmc_die("%s: %zu samples in the saved shard order; the shards hold at most %lld", path, m,
                 (long long)dl->max_samples);
    }
    xfread(dl->intra_shard_indices, sizeof(int32_t), m, f, path, "loader sample order");
    if (!dl_is_permutation_(dl->intra_shard_indices, (int64_t)m, &bad)) {
        llmc_die("%s: loader sample order entry %lld = %d: expected a permutation of 0..%lld", path,
                 (long long)bad, dl->intra_shard_indices[bad], (long long)m - 1);
    }
    dl->restored_samples = (int64_t)m;
    xfread(&dl->shuffle_rng, sizeof(Mt19937), 1, f, path, "loader rng");
    if (!mt_state_valid(&dl->shuffle_rng)) {
        llmc_die("%s: loader rng: left %d, next %u: not a state of the mt19937 generator (expected left + next = "
                 "%d, or 1 and 0)", path, dl->shuffle_rng.left, dl->shuffle_rng.next, MT_N + 1);
    }
}

/* -m against the val data: the batches each evaluation takes. -1 is the whole val data (capped at
 * 2^30 batches), otherwise at most `requested`; 0 would average over no batch (a NaN loss). */
static inline int dataloader_val_batches(int requested, const DataLoader *val) {
    if (requested == 0 || requested < -1) llmc_die("-m %d: expected -1 (the whole val data) or a positive number of batches", requested);
    const int avail = (int)LLMC_MIN(val->total_samples, (int64_t)1 << 30);
    return requested == -1 ? avail : LLMC_MIN(requested, avail);
}

static inline void dataloader_free(DataLoader *dl) {
    if (dl->f != NULL) xfclose(dl->f, dl->current_path);
    globfree(&dl->glob);
    free(dl->buffer);
    free(dl->inputs);
    free(dl->targets);
    free(dl->shard_indices);
    free(dl->intra_shard_indices);
    memset(dl, 0, sizeof(*dl));
}

#endif /* LLMC_DATALOADER_H */
