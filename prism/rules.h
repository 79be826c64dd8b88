/*
 * prism/rules.h: Prism's rules for a layer table (Aggarwal, arXiv 2606.27449; doc/prism.md "Definition",
 * "Constraints", "Candidate schedules and negative controls"): few wide heads early, the base head count late, at the parameters and FLOPs of the
 * uniform model.
 *
 * Defines:
 *   prism_rules_check     the rules on a parsed table (llmc/layer_table.h), a LayerTableCheck:
 *                         what `-prism FILE` adds to `-layers FILE`, the one place they are checked
 *
 * Error: a head count that decreases with depth (the paper's "monotonically increasing"; the
 * negative controls of prism/schedules/controls/ that break it run with -layers, unchecked).
 * Warnings (constraints the abstract does not state as rules, and the controls of doc/prism.md
 * "Candidate schedules and negative controls"): the last layer not at the base head count, fewer than L/2 base layers, a run of a
 * non-base width shorter than 2 or longer than 4 layers, a head count more than doubling between
 * layers, an attention width h*d != C (parameters and FLOPs not neutral, doc/prism.md "Parameter and FLOP neutrality").
 * Every message starts "file:line: ".
 */
#ifndef PRISM_RULES_H
#define PRISM_RULES_H

#include "../llmc/config.h"
#include "../llmc/layer_table.h"

/* `model` supplies C, L and the base head count (its num_heads). */
static inline int prism_rules_check(LayerTable *s, const char *path, const GPT2Config *model) {
    const int C = model->channels, L = model->num_layers, base = model->num_heads;
    /* The constraints the paper does not state as rules (doc/prism.md "Constraints"): warnings only. */
    if (s->layer[L - 1].n_head != base) {
        layer_table_warn(s, path, s->line[L - 1], "the last layer has %d heads; the model's base is %d "
                    "(Prism ends at the base head count)", s->layer[L - 1].n_head, base);
    }
    int n_base = 0;
    for (int l = 0; l < L; l++) n_base += s->layer[l].n_head == base;
    if (2 * n_base < L) {
        layer_table_warn(s, path, s->line[L - 1], "only %d of %d layers use the base %d heads (Prism "
                    "keeps at least half)", n_base, L, base);
    }
    /* Staircase: every run of a non-base head count lasts 2-4 layers. */
    for (int l = 0; l < L;) {
        int r = l;
        while (r < L && s->layer[r].n_head == s->layer[l].n_head) r++;
        const int run = r - l;
        if (s->layer[l].n_head != base && (run < 2 || run > 4)) {
            layer_table_warn(s, path, s->line[l], "a run of %d layer%s with %d heads (head size %d): "
                        "Prism holds each non-base width for 2-4 layers", run, run == 1 ? "" : "s",
                        s->layer[l].n_head, s->layer[l].head_size);
        }
        l = r;
    }
    /* Smoothness: widths step by at most 2x (256 -> 128 -> 64; the "jump" control skips 128). */
    for (int l = 1; l < L; l++) {
        if (s->layer[l].n_head > 2 * s->layer[l - 1].n_head) {
            layer_table_warn(s, path, s->line[l], "layer %d jumps from %d to %d heads (head size %d -> "
                        "%d): Prism steps the head count by at most 2x", l, s->layer[l - 1].n_head,
                        s->layer[l].n_head, s->layer[l - 1].head_size, s->layer[l].head_size);
        }
    }
    /* Neutrality: an explicit head size with h*d != C changes parameters and FLOPs. */
    for (int l = 0; l < L; l++) {
        if (attn_width(&s->layer[l]) != C && (l == 0 || s->line[l] != s->line[l - 1] ||
                                              attn_width(&s->layer[l - 1]) == C)) {
            layer_table_warn(s, path, s->line[l], "layer %d: %d heads x %d = attention width %d, not "
                        "C = %d: parameters and FLOPs differ from the uniform model", l,
                        s->layer[l].n_head, s->layer[l].head_size, attn_width(&s->layer[l]), C);
        }
    }
    /* Monotonicity: few wide heads early, many narrow heads late. Checked last, so that a table
     * it rejects still carries the warnings of the other rules. */
    for (int l = 1; l < L; l++) {
        if (s->layer[l].n_head < s->layer[l - 1].n_head) {
            return layer_table_fail(s, path, s->line[l], "layer %d has %d heads after %d at layer %d: "
                                    "head counts must not decrease with depth (a table that is not a "
                                    "Prism schedule, e.g. a negative control, runs with -layers FILE)",
                                    l, s->layer[l].n_head, s->layer[l - 1].n_head, l - 1);
        }
    }
    return 1;
}

#endif /* PRISM_RULES_H */
