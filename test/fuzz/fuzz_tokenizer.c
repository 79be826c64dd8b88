/* test/fuzz/fuzz_tokenizer.c: the tokenizer-file reader (llmc/tokenizer.h) on arbitrary files,
 * then every token decoded (test/fuzz/fuzz.h). */
#include "fuzz.h"

#include "../../llmc/tokenizer.h"

static Tokenizer t;

static void free_tokenizer(void) { tokenizer_free(&t); }

static int fuzz_one(const char *path, const uint8_t *data, size_t size) {
    (void)data, (void)size;
    fuzz_cleanup = free_tokenizer;
    tokenizer_init(&t, path);
    const int ok = t.init_ok;
    size_t total = 0;
    for (uint32_t i = 0; i < t.vocab_size; i++) total += strlen(tokenizer_decode(&t, i));
    tokenizer_free(&t);
    return ok && total > 0;
}
