/*
 * llmc/kind_option.h: the options a layer kind owns (doc/design.md "A kind's options").
 *
 * A kind that has options (S-D's sign of D, its init, the linear mixer's prescale) describes each
 * one here as a KindOption, in its own folder, and the registry (kinds/registry.h) lists them in
 * KIND_OPTIONS; the framework reads the descriptors and names no kind. An option is
 *   - a flag, in the command-line table's form (llmc/cli.h), on every trainer;
 *   - a role: part of the model and stored in checkpoints (one bit of header[9], doc/formats.md
 *     "Per-layer heads"), part of the init only (with a descriptor -e), or a training setting (any -e);
 *   - a value in every GPT2Config and TrainArgs: vals[i] holds KIND_OPTIONS[i]'s value.
 *
 * Defines:
 *   KindOptValue, KindOption, KIND_OPT_* roles, LLMC_MAX_KIND_OPTIONS
 *   KIND_FLAG              a kind option's flag, for its designated initializer
 *   KIND_OPTIONS, N_KIND_OPTIONS   the registry's list; declared here, defined by kinds/registry.h
 *   kind_option_index      a descriptor's row (by flag: the descriptors are static objects of
 *                          every translation unit, so their addresses differ)
 *   kind_opt_int / kind_opt_float / kind_opt_set_int / kind_opt_set_float   read and write a value
 *   kind_options_defaults  every value at its default
 *   kind_options_header_bits / kind_options_from_header_bits / kind_options_known_bits
 *                          the checkpoint's header[9] bits of the stored options
 *   kind_options_validate  a stored option holds one of the two values its bit can say
 */
#ifndef LLMC_KIND_OPTION_H
#define LLMC_KIND_OPTION_H

#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "utils.h"

#define LLMC_MAX_KIND_OPTIONS 16

/* One option's value: .i for an integer flag, .f for a number. */
typedef union {
    int i;
    float f;
} KindOptValue;

typedef enum {
    KIND_OPT_MODEL, /* the model: stored in checkpoints; with a checkpoint -e, the file's value */
    KIND_OPT_INIT,  /* shapes the init only: with a descriptor -e, not stored */
    KIND_OPT_TRAIN, /* the optimizer: with any -e, not stored (saved in flags.txt, like every flag) */
} KindOptRole;

/* A kind's folder writes each of its options with designated initializers, every field named in
 * this order (as C++ requires), the flag through KIND_FLAG, for example
 *   static const KindOption SD_SIGN = {
 *       .cli = KIND_FLAG(CLI_TYPE_INT, "-sd_sign", -1, 1, "S-D logits u (S + sign D) u^T: ..."),
 *       .dflt = -1, .role = KIND_OPT_MODEL, .header_bit = 4, .bit_value = 1};
 * header_bit 0 for an option that is not stored. */
typedef struct {
    /* the flag as llmc/cli.h parses it: the offset is filled in where the table is built */
    CliOpt cli;
    double dflt;
    KindOptRole role;
    /* KIND_OPT_MODEL: the bit of header[9] that stores it (an integer flag): set for the value
     * bit_value, clear for the default */
    int header_bit;
    int bit_value;
} KindOption;


/* A kind option's flag: its type (CLI_TYPE_INT or CLI_TYPE_FLOAT), name, inclusive range and help;
 * the offset of its value is filled in where the trainers' table is built. */
#define KIND_FLAG(type_, flag_, lo, hi, help_)                                                        \
    {.flag = flag_, .type = type_, .offset = 0, .cap = 0, .min = lo, .max = hi, .choices = NULL, .group = 0, \
     .help = help_}

/* The registry's list, defined once per program by kinds/registry.h. */
extern const KindOption *const KIND_OPTIONS[];
extern const int N_KIND_OPTIONS;

static inline int kind_option_index(const KindOption *o) {
    for (int i = 0; i < N_KIND_OPTIONS; i++)
        if (strcmp(KIND_OPTIONS[i]->cli.flag, o->cli.flag) == 0) return i;
    llmc_die("%s: an option missing from the registry's KIND_OPTIONS (kinds/registry.h)", o->cli.flag);
    return -1;
}

static inline int kind_opt_int(const KindOptValue *v, const KindOption *o) { return v[kind_option_index(o)].i; }
static inline float kind_opt_float(const KindOptValue *v, const KindOption *o) { return v[kind_option_index(o)].f; }
static inline void kind_opt_set_int(KindOptValue *v, const KindOption *o, int x) { v[kind_option_index(o)].i = x; }
static inline void kind_opt_set_float(KindOptValue *v, const KindOption *o, float x) { v[kind_option_index(o)].f = x; }

static inline void kind_options_defaults(KindOptValue *v) {
    memset(v, 0, LLMC_MAX_KIND_OPTIONS * sizeof(KindOptValue));
    for (int i = 0; i < N_KIND_OPTIONS; i++) {
        if (KIND_OPTIONS[i]->cli.type == CLI_TYPE_INT) v[i].i = (int)KIND_OPTIONS[i]->dflt;
        else v[i].f = (float)KIND_OPTIONS[i]->dflt;
    }
}

/* header[9]'s bits for the stored options (the framework's own bit, no LayerNorm, is added by
 * llmc/checkpoint.h). */
static inline int kind_options_header_bits(const KindOptValue *v) {
    int bits = 0;
    for (int i = 0; i < N_KIND_OPTIONS; i++) {
        const KindOption *o = KIND_OPTIONS[i];
        if (o->role == KIND_OPT_MODEL && v[i].i == o->bit_value) bits |= o->header_bit;
    }
    return bits;
}

static inline void kind_options_from_header_bits(int bits, KindOptValue *v) {
    kind_options_defaults(v);
    for (int i = 0; i < N_KIND_OPTIONS; i++) {
        const KindOption *o = KIND_OPTIONS[i];
        if (o->role == KIND_OPT_MODEL && (bits & o->header_bit)) v[i].i = o->bit_value;
    }
}

static inline int kind_options_known_bits(void) {
    int bits = 0;
    for (int i = 0; i < N_KIND_OPTIONS; i++)
        if (KIND_OPTIONS[i]->role == KIND_OPT_MODEL) bits |= KIND_OPTIONS[i]->header_bit;
    return bits;
}

/* "-sd_sign 0: expected -1 or +1": a stored option takes the two values its bit can say. Returns
 * 1, or 0 with the reason in msg. */
static inline int kind_options_validate(const KindOptValue *v, char *msg, size_t cap) {
    for (int i = 0; i < N_KIND_OPTIONS; i++) {
        const KindOption *o = KIND_OPTIONS[i];
        const int d = (int)o->dflt;
        if (o->role != KIND_OPT_MODEL || v[i].i == d || v[i].i == o->bit_value) continue;
        const int sign = d < 0 || o->bit_value < 0;
        snprintf(msg, cap, sign ? "%s %d: expected %+d or %+d" : "%s %d: expected %d or %d", o->cli.flag,
                 v[i].i, d < o->bit_value ? d : o->bit_value, d < o->bit_value ? o->bit_value : d);
        return 0;
    }
    return 1;
}

#endif /* LLMC_KIND_OPTION_H */
