/*
 * llmc/model_init.h: how a trainer gets its model from the command line, shared by train_gpt2.c
 * and train_gpt2.cu so that both build the same model from the same flags (and unit-tested on the
 * CPU by test/test_cuda_host.c):
 *
 *   model_config_from_args   a descriptor -e plus the model options (-ln, and the kinds' options
 *                            of the model and its init, llmc/kind_option.h) and the layer
 *                            table (-layers, llmc/layer_table.h; -prism adds the caller's
 *                            validator: the trainers pass Prism's rules, prism/rules.h); with a checkpoint -e
 *                            those options are an error unless the run resumes (a resumed run
 *                            repeats its command line; the checkpoint's values win)
 *   model_init_params_host   GPT-2's init (llmc/param_init.h) for that config into a new host
 *                            buffer: exactly train_gpt2.py's weights for the seed
 */
#ifndef LLMC_MODEL_INIT_H
#define LLMC_MODEL_INIT_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "config.h"
#include "layer_kind.h"
#include "layer_table.h"
#include "param_init.h"
#include "param_layout.h"

/* The model options a descriptor takes from the command line (a checkpoint has its own): -ln,
 * -emb_scale and every kind option of the model or its init; i counts from 0, NULL past the end. */
static inline const char *model_option_flag(int i) {
    static const char *const framework[] = {"-ln", "-emb_scale"}; /* GPT2Config.use_ln, .emb_scale */
    const int n = (int)(sizeof(framework) / sizeof(framework[0]));
    if (i < n) return framework[i];
    i -= n;
    for (int k = 0; k < N_KIND_OPTIONS; k++)
        if (KIND_OPTIONS[k]->role != KIND_OPT_TRAIN && i-- == 0) return KIND_OPTIONS[k]->cli.flag;
    return NULL;
}

/*
 * For a checkpoint path (init_is_file): only checks the flags (the caller reads the file). For a
 * descriptor: fills c from it, the model options and the layer table of -layers, or of -prism,
 * which `check` (may be NULL) validates; warnings of the table go to
 * stderr. Returns 1, or 0 with a one-line message in err.
 */
static inline int model_config_from_args(const TrainArgs *a, const int *given, const char *init_path,
                                         int init_is_file, int resuming, LayerTableCheck check,
                                         GPT2Config *c, char *err, size_t cap) {
    const char *table = a->layers[0] != '\0' ? a->layers : a->prism[0] != '\0' ? a->prism : NULL;
    const char *flag = a->layers[0] != '\0' ? "-layers" : "-prism";
    if (init_is_file) {
        if (table != NULL) {
            snprintf(err, cap, "%s %.400s: the checkpoint %.400s carries its own layer table; %s "
                     "applies to a descriptor -e (d12, L6C128H2T256, ...)", flag, table, init_path, flag);
            return 0;
        }
        for (int i = 0; model_option_flag(i) != NULL; i++) {
            const char *f = model_option_flag(i);
            if (train_args_given(given, f) && !resuming) {
                snprintf(err, cap, "%s: the checkpoint %.400s carries its own model options; %s applies to "
                         "a descriptor -e", f, init_path, f);
                return 0;
            }
        }
        return 1;
    }
    char msg[2048]; /* room for a descriptor as long as -e allows */
    if (!config_from_descriptor(init_path, c, msg, sizeof(msg))) {
        snprintf(err, cap, "-e: %.500s", msg);
        return 0;
    }
    c->use_ln = a->ln;
    c->emb_scale = a->emb_scale;
    memcpy(c->opt, a->kind_opt, sizeof(c->opt));
    if (table != NULL) {
        const int checked = check != NULL && a->prism[0] != '\0';
        LayerTable *s = (LayerTable *)xmalloc(sizeof(LayerTable));
        if (!layer_table_load(table, c, s) || (checked && !check(s, table, c))) {
            snprintf(err, cap, "%.900s", s->error);
            free(s);
            return 0;
        }
        for (int i = 0; i < s->n_warnings; i++) llmc_warn("%s", s->warning[i]);
        layer_table_apply(s, c);
        free(s);
    }
    if (!config_validate(c, msg, sizeof(msg))) {
        snprintf(err, cap, "-e %.400s: %.500s", init_path, msg);
        return 0;
    }
    return 1;
}

/* layout.total fp32 parameters, GPT-2's init for c. */
static inline float *model_init_params_host(const GPT2Config *c, uint32_t seed) {
    ParamLayout layout;
    param_layout_init(&layout, c);
    float *params = (float *)xmalloc(layout.total * sizeof(float));
    param_init_gpt2(c, &layout, params, seed);
    return params;
}

#endif /* LLMC_MODEL_INIT_H */
