/* test/fuzz/fuzz_shard.c: the token-shard reader (llmc/dataloader.h: header, size, tokens inside
 * the vocabulary) on arbitrary files, read through the shuffling loader for a few batches
 * (test/fuzz/fuzz.h). */
#include "fuzz.h"

#include "../../llmc/config.h"
#include "../../llmc/dataloader.h"

static DataLoader dl;
static int dl_live;

static void free_loader(void) {
    if (dl_live) dataloader_free(&dl);
    dl_live = 0;
}

static int fuzz_one(const char *path, const uint8_t *data, size_t size) {
    (void)data, (void)size;
    fuzz_cleanup = free_loader;
    const int64_t ntok = shard_validate(path);
    if (ntok < 2 * 8 + 1) return 1; /* valid, too short for the loader's window */
    dl_live = 1;
    dataloader_init(&dl, path, 2, 8, 0, 1, 1, GPT2_VOCAB);
    for (int i = 0; i < 4; i++) dataloader_next_batch(&dl);
    free_loader();
    return 1;
}
