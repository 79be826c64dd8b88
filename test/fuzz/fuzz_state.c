/* test/fuzz/fuzz_state.c: the resume-state reader (llmc/state.h and the loader state of
 * llmc/dataloader.h) on arbitrary files, for a run of 16 optimizer values over a fixed 2-shard
 * pattern with shuffling, resumed at step 5 (test/fuzz/fuzz.h). */
#include "fuzz.h"

#include "../../llmc/config.h"
#include "../../llmc/dataloader.h"
#include "../../llmc/state.h"

#define FUZZ_STATE_N 16

/* Two shards of 200 and 136 tokens (24 and 16 windows of 1 x 8) in a private directory. */
static const char *fuzz_shards(void) {
    static char pattern[300];
    if (pattern[0] != '\0') return pattern;
    char dir[256];
    snprintf(dir, sizeof(dir), "%s.shards", fuzz_tmp_path());
    make_dir(dir);
    const int ntok[2] = {200, 136};
    for (int s = 0; s < 2; s++) {
        char path[300];
        snprintf(path, sizeof(path), "%s/shard_%d.bin", dir, s);
        int32_t h[256] = {20240520, 1, ntok[s]};
        uint16_t tok[200];
        for (int i = 0; i < ntok[s]; i++) tok[i] = (uint16_t)(i * 7 % 1000);
        FILE *f = fopen(path, "wb");
        fwrite(h, 4, 256, f);
        fwrite(tok, 2, (size_t)ntok[s], f);
        fclose(f);
    }
    snprintf(pattern, sizeof(pattern), "%s/shard_*.bin", dir);
    return pattern;
}

static DataLoader dl;
static int dl_live;

static void free_loader(void) {
    if (dl_live) dataloader_free(&dl);
    dl_live = 0;
}

static int fuzz_one(const char *path, const uint8_t *data, size_t size) {
    (void)data, (void)size;
    fuzz_cleanup = free_loader;
    const char *pattern = fuzz_shards();
    dl_live = 1;
    dataloader_init(&dl, pattern, 1, 8, 0, 1, 1, GPT2_VOCAB);
    TrainState expect, got;
    memset(&expect, 0, sizeof(expect));
    expect.num_processes = 1;
    expect.should_shuffle = 1;
    expect.step = 5;
    float m[FUZZ_STATE_N], v[FUZZ_STATE_N];
    state_read(path, &got, m, v, NULL, FUZZ_STATE_N, &dl, &expect);
    for (int i = 0; i < 3; i++) dataloader_next_batch(&dl);
    free_loader();
    return 1;
}
