/* test/fuzz/fuzz_checkpoint.c: the model-checkpoint reader (llmc/checkpoint.h: header, layer
 * table, exact size, fp32 or bf16 body) on arbitrary files (test/fuzz/fuzz.h). */
#include "fuzz.h"

#include "../../llmc/checkpoint.h"
#include "../../kinds/registry.h"

static float *params;

static void free_params(void) {
    free(params);
    params = NULL;
}

static int fuzz_one(const char *path, const uint8_t *data, size_t size) {
    (void)data, (void)size;
    fuzz_cleanup = free_params;
    GPT2Config c;
    int bf16 = 0;
    checkpoint_read_header(path, &c, &bf16);
    ParamLayout layout;
    param_layout_init(&layout, &c);
    if (layout.total > ((size_t)1 << 22)) return 1; /* valid, but larger than an input is kept */
    params = (float *)xmalloc(layout.total * sizeof(float));
    checkpoint_read_fp32(path, &c, bf16, params);
    free_params();
    return 1;
}
