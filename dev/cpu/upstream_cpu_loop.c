/*
 * dev/cpu/upstream_cpu_loop.c: upstream llm.c's CPU demo run (the main of its train_gpt2.c: a fixed
 * loop with fixed settings) on this project's model, data loader and AdamW, printing upstream's
 * line formats, so that `scripts/ab_upstream.sh PATH_TO_LLMC --cpu` can compare the two step by
 * step. Our train_gpt2 cannot play upstream's part: it fixes beta2 = 0.95 and clips the gradient
 * norm at 1.0 (llm.c's GPU recipe, doc/formats.md), where upstream's CPU demo uses 0.999 and no clip.
 *
 *   build/upstream_cpu_loop [-e gpt2_124M.bin] [-x 40]
 *
 * The settings, as upstream's train_gpt2.c has them (llm.c f1e2ace): B 4, T 64; the train shard
 * in llm.c's shuffled order (seed 42), the val shard in order; AdamW lr 1e-4, beta1 0.9, beta2
 * 0.999, eps 1e-8, no weight decay, no clipping; before steps 0, 10, 20, ... the val loss, the
 * mean over the first 5 val batches; steps 0 ... 40 (-x), each one update. Like upstream it reads
 * gpt2_124M.bin (-e) and dev/data/tinyshakespeare/tiny_shakespeare_{train,val}.bin from the
 * working directory. Upstream's sampling every 20 steps does not touch the training state and is
 * left out.
 * Output: "val loss %f" and "step %d: train loss %f (took %f ms)", upstream's formats.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../llmc/cli.h"
#include "../../llmc/cpu/cpu_eval.h" /* gpt2_val_loss */
#include "../../llmc/dataloader.h"
#include "../../llmc/cpu/gpt2_cpu.h"
#include "../../llmc/utils.h"
#include "../../kinds/registry_cpu.h"

#define UP_B 4
#define UP_T 64
#define UP_VAL_BATCHES 5
#define UP_VAL_EVERY 10
#define UP_TRAIN "dev/data/tinyshakespeare/tiny_shakespeare_train.bin"
#define UP_VAL "dev/data/tinyshakespeare/tiny_shakespeare_val.bin"
/* upstream's CPU demo optimizer: AdamW(lr 1e-4, betas (0.9, 0.999), eps 1e-8), no weight decay */
static const AdamWHyper UP_ADAMW = {1e-4f, 0.9f, 0.999f, 1e-8f, 0.0f, 0};

typedef struct {
    char init[4096];
    int last_step;
} LoopOpts;

static const CliOpt OPTS[] = {
    CLI_STR(LoopOpts, "-e", init, NULL, 0, "the init checkpoint (upstream reads gpt2_124M.bin)"),
    CLI_INT(LoopOpts, "-x", last_step, 0, 1000000000, 0, "the last step (upstream: 40)"),
};
#define NUM_OPTS ((int)(sizeof(OPTS) / sizeof(OPTS[0])))

int main(int argc, char **argv) {
    LoopOpts o = {"gpt2_124M.bin", 40};
    if (cli_wants_help(argc, argv)) {
        printf("usage: %s [-e gpt2_124M.bin] [-x 40]   (upstream llm.c's CPU demo run on this project's model)\n",
               argv[0]);
        cli_print_options(OPTS, NUM_OPTS, &o, -1, stdout);
        return 0;
    }
    cli_parse(OPTS, NUM_OPTS, &o, argc, argv, NULL, NULL, 0);
#ifdef USE_BLAS
    blas_print_config(stdout);
#endif
    GPT2 model;
    gpt2_build_from_checkpoint(&model, o.init);
    if (!config_is_llmc_uniform(&model.config)) {
        llmc_die("%s: upstream llm.c trains only uniform standard models (version 3/5 files)", o.init);
    }
    DataLoader train, val;
    dataloader_init(&train, UP_TRAIN, UP_B, UP_T, 0, 1, 1, model.config.vocab_size);
    dataloader_init(&val, UP_VAL, UP_B, UP_T, 0, 1, 0, model.config.vocab_size);
    for (int step = 0; step <= o.last_step; step++) {
        if (step % UP_VAL_EVERY == 0) printf("val loss %f\n", gpt2_val_loss(&model, &val, UP_VAL_BATCHES, NULL));
        const double t0 = wall_seconds();
        dataloader_next_batch(&train);
        gpt2_forward(&model, train.inputs, train.targets, UP_B, UP_T);
        gpt2_zero_grad(&model);
        gpt2_backward(&model, 1.0f / (UP_B * UP_T));
        gpt2_update(&model, &UP_ADAMW, 1.0f, step + 1);
        printf("step %d: train loss %f (took %f ms)\n", step, model.mean_loss, (wall_seconds() - t0) * 1e3);
        fflush(stdout);
    }
    dataloader_free(&train);
    dataloader_free(&val);
    gpt2_free(&model);
    return 0;
}
