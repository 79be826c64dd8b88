/*
 * llmc/optimizer.h: AdamW's hyperparameters as one value, so that call sites name them.
 *
 * Defines:
 *   AdamWHyper     lr, beta1, beta2, eps, weight decay, and the slots it decays
 *                  (llmc/param_layout.h param_decay_mask; doc/formats.md "Optimization semantics")
 *   adamw_gpt2     llm.c's GPT-2 setting: betas (0.9, 0.95), eps 1e-8, the run's lr and decay
 *   ROUNDING_RNG_SEED   llm.c's initial state of the bf16 update's rounding RNG
 */
#ifndef LLMC_OPTIMIZER_H
#define LLMC_OPTIMIZER_H

typedef struct {
    float lr, beta1, beta2, eps, weight_decay;
    unsigned decay_mask; /* bit s: slot s is decayed (param_decay_mask) */
} AdamWHyper;

#define ADAMW_GPT2_BETA1 0.9f
#define ADAMW_GPT2_BETA2 0.95f
#define ADAMW_GPT2_EPS 1e-8f

static inline AdamWHyper adamw_gpt2(float lr, float weight_decay, unsigned decay_mask) {
    AdamWHyper h;
    h.lr = lr;
    h.beta1 = ADAMW_GPT2_BETA1;
    h.beta2 = ADAMW_GPT2_BETA2;
    h.eps = ADAMW_GPT2_EPS;
    h.weight_decay = weight_decay;
    h.decay_mask = decay_mask;
    return h;
}

/* llm.c's initial state of the stochastic-rounding RNG of the bf16 update (the same on every
 * rank); the CPU trainer, which rounds nothing, writes it unchanged into its state files. */
#define ROUNDING_RNG_SEED 13371337ull

#endif /* LLMC_OPTIMIZER_H */
