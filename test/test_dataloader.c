/*
 * test/test_dataloader.c: token shards and the data loader (doc/formats.md "Token shards", "DataLoader semantics", "Optimizer/DataLoader state").
 *
 * Synthetic shards where the token at position p of shard s is s*1000 + p, so each batch tells
 * which (shard, sample) the loader read. Checks: the mt19937 stream; llm.c's shuffled order over
 * two epochs (expected sequence derived independently with numpy's RandomState(42), whose legacy
 * seeding is std::mt19937, and the Fisher-Yates rule of doc/formats.md "DataLoader semantics"); sequential order without
 * shuffling; the per-rank slice; targets = inputs shifted by one; save/restore of the shuffle
 * state mid-epoch continues identically; independent rows (-rows 1): every row its own window of
 * T + 1 tokens at a multiple of T, a permutation of all of them per shard, disjoint over ranks,
 * and save/restore.
 */
#include <stdio.h>
#include <string.h>

#include "../llmc/dataloader.h"
#include "harness.h"

enum { B = 2, T = 4 };

static void write_shard(const char *path, int shard, int ntok) {
    int32_t h[256] = {0};
    h[0] = SHARD_MAGIC;
    h[1] = SHARD_VERSION;
    h[2] = ntok;
    FILE *f = xfopen(path, "wb");
    xfwrite(h, sizeof(int32_t), 256, f, path);
    for (int p = 0; p < ntok; p++) {
        uint16_t t = (uint16_t)(shard * 1000 + p);
        xfwrite(&t, sizeof(uint16_t), 1, f, path);
    }
    xfclose(f, path);
}

/* (shard, sample) of the current batch, for nproc windows of B*T tokens */
static void decode(const DataLoader *dl, int *shard, int *sample) {
    *shard = dl->inputs[0] / 1000;
    *sample = (dl->inputs[0] % 1000 - dl->rank * B * T) / (dl->nproc * B * T);
}

/* -rows 1. Shard 0 holds 7*B*T + 4 tokens: (7*B*T + 3) / T = 14 rows of T, so 7 batches of B = 2
 * rows; shard 1 holds 5*B*T + 1: 10 rows, 5 batches. Each row must be T + 1 consecutive tokens
 * starting at a multiple of T, and one shard's epoch must use each of its rows once. */
static void test_rows(const char *pattern, const char *state) {
    DataLoader dl;
    dataloader_init(&dl, pattern, B, T, 0, 1, 1, 50257);
    dataloader_set_rows(&dl, 1);
    CHECK(dl.total_samples == 12 && dl.max_samples == 14, "rows: 12 batches of 2 rows, 14 rows in the largest shard (%lld, %lld)",
          (long long)dl.total_samples, (long long)dl.max_samples);
    int seen[2][16] = {{0}};
    int rows_ok = 1, mixed = 0, passes = 0;
    for (int i = 0; i < 12; i++) { /* one epoch */
        dataloader_next_batch(&dl);
        for (int b = 0; b < B; b++) {
            const int *in = dl.inputs + b * T, *tg = dl.targets + b * T;
            const int shard = in[0] / 1000, pos = in[0] % 1000;
            rows_ok &= pos % T == 0 && shard == dl.inputs[0] / 1000;
            for (int j = 0; j < T; j++) rows_ok &= in[j] == in[0] + j && tg[j] == in[j] + 1;
            if (pos % T == 0 && pos / T < 16) seen[shard][pos / T]++;
        }
        mixed += dl.inputs[T] != dl.inputs[T - 1] + 1; /* row 1 does not continue row 0 */
    }
    for (int r = 0; r < 14; r++) passes += seen[0][r] == 1;
    for (int r = 0; r < 10; r++) passes += seen[1][r] == 1;
    CHECK(rows_ok, "rows: every row is T+1 consecutive tokens from a multiple of T, targets shifted by one");
    CHECK(passes == 24, "rows: one epoch reads each of the 14 + 10 rows once (%d of 24)", passes);
    CHECK(mixed >= 8, "rows: the two rows of a batch are not one span (%d of 12 batches)", mixed);

    /* the same order again from a fresh loader; another seed, another order */
    DataLoader again, other;
    dataloader_init(&again, pattern, B, T, 0, 1, 1, 50257);
    dataloader_set_rows(&again, 1);
    dataloader_init(&other, pattern, B, T, 0, 1, 1, 50257);
    dataloader_set_rows(&other, 1);
    dataloader_set_seed(&other, 7);
    dataloader_set_seed(&dl, 42); /* back to the start */
    int same = 1, differ = 0;
    for (int i = 0; i < 30; i++) {
        dataloader_next_batch(&dl);
        dataloader_next_batch(&again);
        dataloader_next_batch(&other);
        same &= memcmp(dl.inputs, again.inputs, sizeof(int) * B * T) == 0;
        differ += memcmp(dl.inputs, other.inputs, sizeof(int) * B * T) != 0;
    }
    CHECK(same && differ > 0, "rows: seed 42 repeats over 2.5 epochs; seed 7 differs (%d of 30 batches)", differ);

    /* save mid-shard, restore into a fresh loader, continue over the epoch boundary */
    for (int i = 0; i < 3; i++) dataloader_next_batch(&dl);
    AtomicFile af;
    atomic_open(&af, state);
    dataloader_write_shuffle(&dl, &af);
    atomic_commit(&af);
    DataLoader back;
    dataloader_init(&back, pattern, B, T, 0, 1, 1, 50257);
    dataloader_set_rows(&back, 1);
    FILE *f = xfopen(state, "rb");
    dataloader_read_shuffle(&back, f, state);
    fclose(f);
    dataloader_resume(&back, dl.current_shard_idx, dl.current_sample_idx, state);
    const int restored = back.restored_samples == back.shard_order_len;
    int cont = 1;
    for (int i = 0; i < 20; i++) {
        dataloader_next_batch(&dl);
        dataloader_next_batch(&back);
        cont &= memcmp(dl.inputs, back.inputs, sizeof(int) * B * T) == 0;
    }
    CHECK(cont && restored,
          "rows: save + restore of the row order mid-shard continues identically (20 batches)");

    /* two ranks: the same permutation, disjoint rows; 14 rows / (2*2) = 3 batches in shard 0 */
    DataLoader r0, r1;
    dataloader_init(&r0, pattern, B, T, 0, 2, 1, 50257);
    dataloader_set_rows(&r0, 1);
    dataloader_init(&r1, pattern, B, T, 1, 2, 1, 50257);
    dataloader_set_rows(&r1, 1);
    int disjoint = 1, same_shard = 1;
    for (int i = 0; i < 5; i++) {
        dataloader_next_batch(&r0);
        dataloader_next_batch(&r1);
        same_shard &= r0.inputs[0] / 1000 == r1.inputs[0] / 1000;
        for (int b0 = 0; b0 < B; b0++)
            for (int b1 = 0; b1 < B; b1++) disjoint &= r0.inputs[b0 * T] != r1.inputs[b1 * T];
    }
    CHECK(disjoint && same_shard && r0.total_samples == 3 + 2,
          "rows, 2 ranks: the same shard, disjoint rows in each of 5 batches; 3 + 2 batches per epoch");

    dataloader_free(&dl);
    dataloader_free(&again);
    dataloader_free(&other);
    dataloader_free(&back);
    dataloader_free(&r0);
    dataloader_free(&r1);
}

int main(void) {
    const char *dir = "build/tmp_dataloader";
    make_dir("build");
    make_dir(dir);
    char p0[256], p1[256], pattern[256], state[256];
    snprintf(p0, sizeof(p0), "%s/shard_000.bin", dir);
    snprintf(p1, sizeof(p1), "%s/shard_001.bin", dir);
    snprintf(pattern, sizeof(pattern), "%s/shard_*.bin", dir);
    snprintf(state, sizeof(state), "%s/loader_state.bin", dir);
    write_shard(p0, 0, 7 * B * T + 1 + 3); /* 7 windows; the 3-token tail is dropped */
    write_shard(p1, 1, 5 * B * T + 1);     /* 5 windows */

    Mt19937 mt;
    mt_seed(&mt, 42);
    const uint32_t expect_u32[5] = {1608637542u, 3421126067u, 4083286876u, 787846414u, 3143890026u};
    int ok = 1;
    for (int i = 0; i < 5; i++) ok &= mt_u32(&mt) == expect_u32[i];
    CHECK(ok, "mt19937 seeded 42 gives std::mt19937's first five outputs");
    mt_seed(&mt, 5489);
    CHECK(mt_u32(&mt) == 3499211612u, "mt19937 seeded 5489 (the C++ default) gives 3499211612");

    DataLoader dl;
    dataloader_init(&dl, pattern, B, T, 0, 1, 1, 50257);
    CHECK(dl.n_files == 2 && dl.total_samples == 12 && dl.total_tokens == 7 * B * T + 4 + 5 * B * T + 1,
          "two shards, 12 windows, tail dropped");
    static const int expect[30][2] = {
        {1, 4}, {1, 3}, {1, 1}, {1, 0}, {1, 2}, {0, 1}, {0, 0}, {0, 6}, {0, 2}, {0, 5},
        {0, 4}, {0, 3}, {0, 3}, {0, 4}, {0, 2}, {0, 5}, {0, 1}, {0, 0}, {0, 6}, {1, 3},
        {1, 0}, {1, 1}, {1, 4}, {1, 2}, {0, 2}, {0, 4}, {0, 0}, {0, 1}, {0, 6}, {0, 5}};
    int order_ok = 1, targets_ok = 1;
    for (int i = 0; i < 30; i++) {
        dataloader_next_batch(&dl);
        int s, k;
        decode(&dl, &s, &k);
        if (s != expect[i][0] || k != expect[i][1]) {
            order_ok = 0;
            printf("  batch %d: got (%d, %d), expected (%d, %d)\n", i, s, k, expect[i][0], expect[i][1]);
        }
        for (int j = 0; j < B * T; j++) targets_ok &= dl.targets[j] == dl.inputs[j] + 1 && dl.inputs[j] == dl.inputs[0] + j;
    }
    CHECK(order_ok, "shuffled order over 2.5 epochs equals llm.c's (shard order re-permuted per epoch)");
    CHECK(targets_ok, "targets are the inputs shifted by one token, windows contiguous");

    /* save after 9 batches of a fresh loader, restore into another, continue */
    DataLoader a, b;
    dataloader_init(&a, pattern, B, T, 0, 1, 1, 50257);
    for (int i = 0; i < 9; i++) dataloader_next_batch(&a);
    AtomicFile af;
    atomic_open(&af, state);
    dataloader_write_shuffle(&a, &af);
    atomic_commit(&af);
    dataloader_init(&b, pattern, B, T, 0, 1, 1, 50257);
    FILE *f = xfopen(state, "rb");
    dataloader_read_shuffle(&b, f, state);
    fclose(f);
    dataloader_resume(&b, a.current_shard_idx, a.current_sample_idx, state);
    int same = 1;
    for (int i = 0; i < 20; i++) {
        dataloader_next_batch(&a);
        dataloader_next_batch(&b);
        same &= memcmp(a.inputs, b.inputs, sizeof(int) * B * T) == 0;
    }
    CHECK(same, "save + restore of the shuffle state mid-shard continues identically (20 batches)");

    /* -data_seed: set_seed(42) is the fresh loader; another seed another order, reproducibly */
    DataLoader s42, s7, s7b, fresh;
    dataloader_init(&fresh, pattern, B, T, 0, 1, 1, 50257);
    dataloader_init(&s42, pattern, B, T, 0, 1, 1, 50257);
    for (int i = 0; i < 3; i++) dataloader_next_batch(&s42); /* set_seed restarts from any point */
    dataloader_set_seed(&s42, 42);
    dataloader_init(&s7, pattern, B, T, 0, 1, 1, 50257);
    dataloader_set_seed(&s7, 7);
    dataloader_init(&s7b, pattern, B, T, 0, 1, 1, 50257);
    dataloader_set_seed(&s7b, 7);
    int same42 = 1, same7 = 1, differ = 0;
    for (int i = 0; i < 24; i++) {
        dataloader_next_batch(&fresh);
        dataloader_next_batch(&s42);
        dataloader_next_batch(&s7);
        dataloader_next_batch(&s7b);
        same42 &= memcmp(fresh.inputs, s42.inputs, sizeof(int) * B * T) == 0;
        same7 &= memcmp(s7.inputs, s7b.inputs, sizeof(int) * B * T) == 0;
        differ += memcmp(fresh.inputs, s7.inputs, sizeof(int) * B * T) != 0;
    }
    CHECK(same42, "dataloader_set_seed(42) gives the fresh loader's order (24 batches, 2 epochs)");
    CHECK(same7 && differ > 0, "seed 7: the same order twice, another than seed 42's (%d of 24 batches differ)", differ);
    dataloader_free(&fresh);
    dataloader_free(&s42);
    dataloader_free(&s7);
    dataloader_free(&s7b);

    /* no shuffle: file order, then wrap to the start */
    DataLoader v;
    dataloader_init(&v, pattern, B, T, 0, 1, 0, 50257);
    int seq_ok = 1;
    for (int i = 0; i < 14; i++) {
        dataloader_next_batch(&v);
        int s, k;
        decode(&v, &s, &k);
        int es = i < 7 ? 0 : (i < 12 ? 1 : 0), ek = i < 7 ? i : (i < 12 ? i - 7 : i - 12);
        seq_ok &= s == es && k == ek;
    }
    CHECK(seq_ok, "without shuffling: shard 0 windows 0..6, shard 1 windows 0..4, then wrap");

    /* rank 1 of 2 reads the second B*T slice of each 2*B*T window */
    DataLoader r1;
    dataloader_init(&r1, pattern, B, T, 1, 2, 0, 50257);
    dataloader_next_batch(&r1);
    CHECK(r1.inputs[0] == B * T && r1.shard_num_samples == 3, "rank 1/2: first token at offset B*T = %d, 3 windows in shard 0",
          r1.inputs[0]);

    test_rows(pattern, state);

    dataloader_free(&dl);
    dataloader_free(&a);
    dataloader_free(&b);
    dataloader_free(&v);
    dataloader_free(&r1);
    return test_finish();
}
