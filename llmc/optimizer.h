/*
 * llmc/optimizer.h: AdamW's hyperparameters as one value, so that call sites name them.
 *
 * Defines:
 *   AdamWHyper     lr, beta1, beta2, eps, weight decay, and whether the packed S-D skew
 *                  parameters are decayed too (doc/formats.md 11; doc/methods.md 3.7)
 *   adamw_gpt2     llm.c's GPT-2 setting: betas (0.9, 0.95), eps 1e-8, the run's lr and decay
 *   ROUNDING_RNG_SEED   llm.c's initial state of the bf16 update's rounding RNG
 */
#ifndef LLMC_OPTIMIZER_H
#define LLMC_OPTIMIZER_H

typedef struct {
    float lr, beta1, beta2, eps, weight_decay;
    int decay_sd_skew; /* 1: AdamW also decays the packed skew S (-sd_decay_s) */
} AdamWHyper;

#define ADAMW_GPT2_BETA1 0.9f
#define ADAMW_GPT2_BETA2 0.95f
#define ADAMW_GPT2_EPS 1e-8f

static inline AdamWHyper adamw_gpt2(float lr, float weight_decay, int decay_sd_skew) {
    AdamWHyper h;
    h.lr = lr;
    h.beta1 = ADAMW_GPT2_BETA1;
    h.beta2 = ADAMW_GPT2_BETA2;
    h.eps = ADAMW_GPT2_EPS;
    h.weight_decay = weight_decay;
    h.decay_sd_skew = decay_sd_skew;
    return h;
}

/* llm.c's initial state of the stochastic-rounding RNG of the bf16 update (the same on every
 * rank); the CPU trainer, which rounds nothing, writes it unchanged into its state files. */
#define ROUNDING_RNG_SEED 13371337ull

#endif /* LLMC_OPTIMIZER_H */
