/*
 * llmc/val_loss.h: the val loss of the CPU model, as ./train_gpt2 reports it ("val loss" in
 * the log) and sd_attention/sd_surgery reports it before and after an operation: the mean of
 * the per-batch mean losses over the first N batches of the val data, read in order from the
 * start (no shuffle), so every call sees the same tokens. The GPU trainer has its own
 * (train_gpt2.cu: the losses stay on the device and are averaged over ranks).
 */
#ifndef LLMC_VAL_LOSS_H
#define LLMC_VAL_LOSS_H

#include "dataloader.h"
#include "gpt2_cpu.h"

/* batches: how many (dataloader_val_batches gives -m's count); the loader is rewound first. */
static inline float gpt2_val_loss(GPT2 *model, DataLoader *val, int batches) {
    dataloader_reset(val);
    double sum = 0.0;
    for (int i = 0; i < batches; i++) {
        dataloader_next_batch(val);
        gpt2_forward(model, val->inputs, val->targets, val->B, val->T);
        sum += model->mean_loss;
    }
    return (float)(sum / batches);
}

#endif /* LLMC_VAL_LOSS_H */
