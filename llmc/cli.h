/*
 * llmc/cli.h: table-driven command lines for every program of the project (the trainers through
 * llmc/args.h, and the tools: eval_gpt2, attn_distance, sd_spectrum, sd_surgery).
 *
 * Defines:
 *   CliOpt            one flag: name, type, field offset in the program's options struct, range
 *                     or choices, help group, help text
 *   CLI_INT / CLI_FLT / CLI_STR   table-row macros
 *   cli_wants_help    --help or -help anywhere on the command line
 *   cli_parse         flag/value pairs into the options struct; every bad flag or value is one
 *                     error line naming the flag and what was expected, and exit 1
 *   cli_print_options the help lines of one group, generated from the table with the defaults,
 *                     so help text and parser cannot drift apart (llm.c's did)
 *   cli_value_text    a field's value as text (help defaults, start-up tables)
 *
 * Messages: "-x: unknown flag (see PROG --help)", "-x: expected a value after the flag",
 * "-x 'v': expected an integer in [lo, hi]", "-x 'v': expected a number in [lo, hi]",
 * "-x 'v': expected one of {a|b}".
 */
#ifndef LLMC_CLI_H
#define LLMC_CLI_H

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "utils.h"

typedef enum { CLI_TYPE_INT, CLI_TYPE_FLOAT, CLI_TYPE_STRING } CliType;

typedef struct {
    const char *flag;
    CliType type;
    size_t offset;       /* of the field in the options struct */
    size_t cap;          /* strings: the field's buffer size */
    double min, max;     /* numbers: inclusive range */
    const char *choices; /* strings: "a|b|c", or NULL for free text */
    int group;           /* help section (and, for the trainers, the GPU-only flags) */
    const char *help;
} CliOpt;

#define CLI_INT(S, f, field, lo, hi, grp, h) {f, CLI_TYPE_INT, offsetof(S, field), 0, lo, hi, NULL, grp, h}
#define CLI_FLT(S, f, field, lo, hi, grp, h) {f, CLI_TYPE_FLOAT, offsetof(S, field), 0, lo, hi, NULL, grp, h}
#define CLI_STR(S, f, field, ch, grp, h) \
    {f, CLI_TYPE_STRING, offsetof(S, field), sizeof(((S *)0)->field), 0, 0, ch, grp, h}

static inline int cli_wants_help(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-help") == 0) return 1;
    return 0;
}

static inline int cli_find(const CliOpt *t, int n, const char *flag) {
    for (int i = 0; i < n; i++)
        if (strcmp(t[i].flag, flag) == 0) return i;
    return -1;
}

static inline void cli_value_text(const CliOpt *o, const void *opts, char *buf, size_t cap) {
    const char *base = (const char *)opts + o->offset;
    if (o->type == CLI_TYPE_INT) snprintf(buf, cap, "%d", *(const int *)base);
    else if (o->type == CLI_TYPE_FLOAT) snprintf(buf, cap, "%g", (double)*(const float *)base);
    else snprintf(buf, cap, "%s", base[0] ? base : "\"\"");
}

static inline int cli_choice_ok(const char *choices, const char *val) {
    const size_t n = strlen(val);
    for (const char *p = choices; *p;) {
        const char *bar = strchr(p, '|');
        const size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncmp(p, val, n) == 0) return 1;
        p += len + (bar ? 1 : 0);
    }
    return 0;
}

/* Validates and stores one value; a bad one leaves opts as it was and returns 0 with the reason
 * in err ("-flag 'value': expected ..."). */
static inline int cli_try_set(const CliOpt *o, void *opts, const char *val, char *err, size_t cap) {
    char *dst = (char *)opts + o->offset;
    if (o->type == CLI_TYPE_INT) {
        char *end = NULL;
        errno = 0;
        long long v = strtoll(val, &end, 10);
        if (errno != 0 || end == val || *end != '\0' || v < (long long)o->min || v > (long long)o->max) {
            snprintf(err, cap, "%s '%s': expected an integer in [%.0f, %.0f] (%s)", o->flag, val, o->min, o->max, o->help);
            return 0;
        }
        *(int *)dst = (int)v;
    } else if (o->type == CLI_TYPE_FLOAT) {
        char *end = NULL;
        errno = 0;
        double v = strtod(val, &end);
        if (errno != 0 || end == val || *end != '\0' || v != v || v < o->min || v > o->max) {
            snprintf(err, cap, "%s '%s': expected a number in [%g, %g] (%s)", o->flag, val, o->min, o->max, o->help);
            return 0;
        }
        *(float *)dst = (float)v;
    } else {
        if (strlen(val) + 1 > o->cap) {
            snprintf(err, cap, "%s: value longer than %zu characters", o->flag, o->cap - 1);
            return 0;
        }
        if (o->choices != NULL && !cli_choice_ok(o->choices, val)) {
            snprintf(err, cap, "%s '%s': expected one of {%s}", o->flag, val, o->choices);
            return 0;
        }
        strcpy(dst, val);
    }
    return 1;
}

/* Validates and stores one value; dies with one line on a bad one. */
static inline void cli_set(const CliOpt *o, void *opts, const char *val) {
    char err[1400];
    if (!cli_try_set(o, opts, val, err, sizeof(err))) llmc_die("%s", err);
}

/* Parses flag/value pairs (argv[1..]) into opts, which holds the defaults already. positional:
 * if not NULL, one argument that is not a flag (e.g. a model path) is stored there (cap bytes).
 * given[i] (if not NULL) is set for every table row that appeared. */
static inline void cli_parse(const CliOpt *t, int n, void *opts, int argc, char **argv, int *given,
                             char *positional, size_t positional_cap) {
    if (given != NULL)
        for (int i = 0; i < n; i++) given[i] = 0;
    int have_positional = 0;
    for (int i = 1; i < argc;) {
        const char *flag = argv[i];
        if (positional != NULL && flag[0] != '-' && !have_positional) {
            if (strlen(flag) + 1 > positional_cap) llmc_die("%s: argument longer than %zu characters", flag, positional_cap - 1);
            strcpy(positional, flag);
            have_positional = 1;
            i++;
            continue;
        }
        const int k = cli_find(t, n, flag);
        if (k < 0) llmc_die("%s: unknown flag (see %s --help)", flag, argv[0]);
        if (i + 1 >= argc) llmc_die("%s: expected a value after the flag (see %s --help)", flag, argv[0]);
        cli_set(&t[k], opts, argv[i + 1]);
        if (given != NULL) given[k] = 1;
        i += 2;
    }
}

/* Help lines of the rows in `group` (group < 0: every row): "  -flag  help {choices} (default X)". */
static inline void cli_print_options(const CliOpt *t, int n, const void *defaults, int group, FILE *out) {
    int width = 0;
    for (int i = 0; i < n; i++)
        if (group < 0 || t[i].group == group) width = LLMC_MAX(width, (int)strlen(t[i].flag));
    for (int i = 0; i < n; i++) {
        const CliOpt *o = &t[i];
        if (group >= 0 && o->group != group) continue;
        char def[1100], range[160] = "";
        cli_value_text(o, defaults, def, sizeof(def));
        if (o->type == CLI_TYPE_STRING && o->choices) snprintf(range, sizeof(range), " {%s}", o->choices);
        else if (o->type == CLI_TYPE_INT && o->min == 0 && o->max == 1) snprintf(range, sizeof(range), " {0|1}");
        fprintf(out, "  %-*s  %s%s (default %s)\n", width, o->flag, o->help, range, def);
    }
}

#endif /* LLMC_CLI_H */
