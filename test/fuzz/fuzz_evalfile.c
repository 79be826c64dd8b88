/* test/fuzz/fuzz_evalfile.c: the eval-file reader (llmc/evalloader.h, versions 1 and 2) on
 * arbitrary files, then every example packed into (B, T) batches as the evaluators do
 * (test/fuzz/fuzz.h). */
#include "fuzz.h"

#include "../../llmc/config.h"
#include "../../llmc/evalloader.h"

static EvalFile ef;
static EvalBatch b;

static void free_eval(void) {
    evalfile_free(&ef);
    eval_batch_free(&b);
}

static int fuzz_one(const char *path, const uint8_t *data, size_t size) {
    (void)data, (void)size;
    fuzz_cleanup = free_eval;
    char err[4400], why[256];
    if (!evalfile_read(&ef, path, GPT2_VOCAB, err, sizeof(err))) return 0;
    const int B = 16, T = 64;
    if (evalfile_check_shape(&ef, ef.num_examples, B, T, why, sizeof(why)) < 0) {
        eval_batch_init(&b, B, T);
        for (int next = 0; next < ef.num_examples;) next += eval_batch_pack(&b, &ef, next, ef.num_examples, 0);
    }
    free_eval();
    return 1;
}
