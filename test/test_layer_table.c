/*
 * test/test_layer_table.c: Prism schedule files (llmc/layer_table.h) against doc/prism.md "Prism head schedules".
 *
 * Every behaviour is checked together with its message: the "sched.txt:LINE: " prefix with the
 * right line number and the key phrase of the text. Then every preset in prism/schedules/ and
 * every negative control in prism/schedules/controls/ is loaded against the model its name
 * implies (d12_* -> d12, d24_* -> d24, L<l>C<c>_* -> L<l>C<c>H<c/64>, e.g. L24C1536H24).
 *
 * Build and run from the repository root (the preset paths are relative to it):
 *   gcc -O2 -march=native -fopenmp -Wall -Wextra -std=c11 -D_GNU_SOURCE test/test_layer_table.c \
 *       -o /tmp/test_layer_table -lm && /tmp/test_layer_table
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../llmc/config.h"
#include "../llmc/layer_table.h"
#include "../prism/rules.h"
#include "harness.h"
#include "../kinds/registry.h"

/* How the trainers read a table: -prism parses it and checks Prism's rules (prism_rules_check);
 * -layers (unchecked = 1 here) only parses it. */
static int table_parse(const char *text, const char *path, const GPT2Config *m, int unchecked, LayerTable *s) {
    return layer_table_parse(text, path, m, s) && (unchecked || prism_rules_check(s, path, m));
}
static int table_load(const char *path, const GPT2Config *m, int unchecked, LayerTable *s) {
    return layer_table_load(path, m, s) && (unchecked || prism_rules_check(s, path, m));
}

static GPT2Config model_of(const char *desc) {
    GPT2Config c;
    char msg[256];
    if (!config_from_descriptor(desc, &c, msg, sizeof(msg))) llmc_die("%s", msg);
    return c;
}

/* Does `msg` start with "sched.txt:LINE: "? */
static int has_prefix(const char *msg, const char *path, int line) {
    char want[300];
    snprintf(want, sizeof(want), "%s:%d: ", path, line);
    return strncmp(msg, want, strlen(want)) == 0;
}

/* Index of the first warning containing `phrase`, or -1. */
static int find_warning(const LayerTable *s, const char *phrase) {
    for (int i = 0; i < s->n_warnings; i++)
        if (strstr(s->warning[i], phrase) != NULL) return i;
    return -1;
}

/* Parses `text` (as "sched.txt") and expects an error at `line` whose text contains every
 * non-NULL phrase. */
static void expect_error(const char *name, const char *text, const GPT2Config *m, int unchecked,
                         int line, const char *phrase1, const char *phrase2) {
    LayerTable s;
    int ok = table_parse(text, "sched.txt", m, unchecked, &s);
    CHECK(ok == 0 && s.has_error, "%s: rejected (returned %d, has_error %d)", name, ok, s.has_error);
    CHECK(has_prefix(s.error, "sched.txt", line), "%s: error starts 'sched.txt:%d: ': \"%s\"", name,
          line, s.error);
    if (phrase1) CHECK(strstr(s.error, phrase1) != NULL, "%s: error mentions '%s'", name, phrase1);
    if (phrase2) CHECK(strstr(s.error, phrase2) != NULL, "%s: error mentions '%s'", name, phrase2);
}

/* Parses `text` and expects success with exactly `n_warn` warnings; returns the schedule. */
static LayerTable expect_ok(const char *name, const char *text, const GPT2Config *m,
                               int unchecked, int n_warn) {
    LayerTable s;
    int ok = table_parse(text, "sched.txt", m, unchecked, &s);
    CHECK(ok == 1 && !s.has_error, "%s: accepted (error: \"%s\")", name, s.has_error ? s.error : "");
    CHECK(s.n_warnings == n_warn, "%s: %d warning(s), expected %d%s%s", name, s.n_warnings, n_warn,
          s.n_warnings > 0 ? "; first: " : "", s.n_warnings > 0 ? s.warning[0] : "");
    return s;
}

/* Expects a warning containing `phrase` with prefix "sched.txt:LINE: ". */
static void expect_warning(const char *name, const LayerTable *s, int line, const char *phrase,
                           const char *phrase2) {
    int i = find_warning(s, phrase);
    CHECK(i >= 0, "%s: a warning mentions '%s'", name, phrase);
    if (i < 0) return;
    CHECK(has_prefix(s->warning[i], "sched.txt", line), "%s: warning starts 'sched.txt:%d: ': \"%s\"",
          name, line, s->warning[i]);
    if (phrase2)
        CHECK(strstr(s->warning[i], phrase2) != NULL, "%s: that warning mentions '%s'", name, phrase2);
}

/* Checks layers [first, first + n) have h heads of size d, kind mha. */
static int table_run_is(const LayerTable *s, int first, int n, int h, int d) {
    for (int l = first; l < first + n; l++)
        if (s->layer[l].n_head != h || s->layer[l].head_size != d || s->layer[l].kind != ATTN_MHA)
            return 0;
    return 1;
}

/* ---------------------------------------------------------------------------------------------- */

static void test_valid(void) {
    const GPT2Config d12 = model_of("d12");
    CHECK(d12.num_layers == 12 && d12.channels == 768 && d12.num_heads == 12,
          "d12 descriptor: L %d, C %d, base %d", d12.num_layers, d12.channels, d12.num_heads);

    LayerTable s = expect_ok("P-A one line", "3*2 6*2 12*8", &d12, 0, 0);
    CHECK(s.n_layers == 12, "P-A: 12 layers (%d)", s.n_layers);
    CHECK(table_run_is(&s, 0, 2, 3, 256) && table_run_is(&s, 2, 2, 6, 128) &&
              table_run_is(&s, 4, 8, 12, 64),
          "P-A: layers 0-1 3x256, 2-3 6x128, 4-11 12x64");
    int all_line1 = 1;
    for (int l = 0; l < 12; l++) all_line1 &= s.line[l] == 1;
    CHECK(all_line1, "P-A: every layer's source line is 1");
    GPT2Config applied = d12;
    layer_table_apply(&s, &applied);
    int widths_c = 1;
    for (int l = 0; l < 12; l++) widths_c &= attn_width(&applied.layer[l]) == 768;
    CHECK(widths_c && applied.layer[0].n_head == 3 && applied.layer[11].n_head == 12,
          "P-A applied: attention width C at every layer, heads 3 ... 12");

    const char *multi = "# P-A over several lines\n"
                        "3*2   # two layers of 256-wide heads\n"
                        "\n"
                        "6*2#no space before the comment\n"
                        "  # a comment line\n"
                        "\t12*4 12*4\n";
    s = expect_ok("P-A multi-line with comments", multi, &d12, 0, 0);
    CHECK(table_run_is(&s, 0, 2, 3, 256) && table_run_is(&s, 2, 2, 6, 128) &&
              table_run_is(&s, 4, 8, 12, 64),
          "multi-line: the same table as P-A");
    CHECK(s.line[0] == 2 && s.line[1] == 2 && s.line[2] == 4 && s.line[3] == 4 && s.line[4] == 6 &&
              s.line[11] == 6,
          "multi-line: source lines 2,2,4,4,6..6 (got %d,%d,%d,%d,%d..%d)", s.line[0], s.line[1],
          s.line[2], s.line[3], s.line[4], s.line[11]);

    s = expect_ok("uniform 12*12", "12*12\n", &d12, 0, 0);
    CHECK(table_run_is(&s, 0, 12, 12, 64), "uniform: 12 heads x 64 at every layer");

    s = expect_ok("explicit default sizes", "3x256*2 6x128*2 12x64*8", &d12, 0, 0);
    CHECK(table_run_is(&s, 0, 2, 3, 256) && table_run_is(&s, 2, 2, 6, 128) &&
              table_run_is(&s, 4, 8, 12, 64),
          "HxD with D = C/H gives the P-A table");

    s = expect_ok("explicit :mha kind", "3:mha*2 6*2 12:mha*8", &d12, 0, 0);
    CHECK(table_run_is(&s, 0, 2, 3, 256), "H:mha*N parses as mha");

    s = expect_ok("singles", "3 3 6 6 12 12 12 12 12 12 12 12", &d12, 0, 0);
    CHECK(table_run_is(&s, 0, 2, 3, 256) && table_run_is(&s, 4, 8, 12, 64),
          "repeat count defaults to 1");

    /* explicit head size: A = 12 x 32 = 384 != C, accepted (S-D attention's seam) */
    s = expect_ok("explicit head size 12x32*12", "12x32*12", &d12, 0, 1);
    expect_warning("explicit head size 12x32*12", &s, 1, "attention width 384, not C = 768",
                   "parameters and FLOPs differ");
    CHECK(table_run_is(&s, 0, 12, 12, 32), "12x32: head size 32 at every layer");
    CHECK(attn_width(&s.layer[0]) == 384 && attn_width(&s.layer[0]) != d12.channels,
          "12x32: attention width %d != C = %d", attn_width(&s.layer[0]), d12.channels);

    /* other shapes */
    const GPT2Config d24 = model_of("d24");
    s = expect_ok("d24 P-A", "4*3 8*3 16*18", &d24, 0, 0);
    CHECK(table_run_is(&s, 0, 3, 4, 256) && table_run_is(&s, 3, 3, 8, 128) &&
              table_run_is(&s, 6, 18, 16, 64),
          "d24 P-A: 4x256, 8x128, 16x64");
    const GPT2Config big = model_of("L24C1536H24");
    CHECK(big.num_layers == 24 && big.channels == 1536 && big.num_heads == 24,
          "L24C1536H24: L %d, C %d, base %d", big.num_layers, big.channels, big.num_heads);
    s = expect_ok("L24C1536 P-B", "6*4 12*4 24*16", &big, 0, 0);
    CHECK(table_run_is(&s, 0, 4, 6, 256) && table_run_is(&s, 4, 4, 12, 128) &&
              table_run_is(&s, 8, 16, 24, 64),
          "L24C1536 P-B: 6x256, 12x128, 24x64");
    const GPT2Config tiny = model_of("tiny");
    s = expect_ok("tiny 2*2 4*2", "2*2 4*2", &tiny, 0, 0);
    CHECK(table_run_is(&s, 0, 2, 2, 32) && table_run_is(&s, 2, 2, 4, 16), "tiny: 2x32, 4x16");
}

static void test_errors(void) {
    const GPT2Config d12 = model_of("d12");
    /* syntax: every malformed entry names itself and the accepted forms */
    const char *bad[] = {"3*", "x4", "3**2", "abc", "3*0", "0", "3x", "3x0*2", "-3", "3*2x", "12:"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char text[64], name[64], quoted[64];
        snprintf(text, sizeof(text), "12*11\n%s\n", bad[i]); /* the bad entry on line 2 */
        snprintf(name, sizeof(name), "syntax '%s'", bad[i]);
        snprintf(quoted, sizeof(quoted), "bad entry '%s'", bad[i]);
        if (strcmp(bad[i], "12:") == 0) /* an empty kind name is an unknown kind */
            expect_error(name, text, &d12, 0, 2, "unknown attention kind ''", NULL);
        else
            expect_error(name, text, &d12, 0, 2, quoted, "expected H, HxD, H:kind");
    }
    expect_error("syntax on line 1", "3** 6*2 12*8", &d12, 0, 1, "bad entry '3**'", NULL);

    expect_error("unknown kind", "12:foo*12", &d12, 0, 1, "unknown attention kind 'foo'",
                 "expected mha, sd, lin or sdlin");
    expect_error("unknown kind (line 3)", "# c\n12*11\n12:foo", &d12, 0, 3,
                 "unknown attention kind 'foo'", NULL);
    /* the attention kinds of the S-D module (doc/methods.md "Formulation A", "ELU+1 causal linear attention") */
    {
        LayerTable k = expect_ok("kinds sd, lin, sdlin", "12*2 12:sd*4\n12:lin*3 12x8:sdlin*3", &d12, 0, 1);
        int kinds_ok = k.n_layers == 12 && k.layer[0].kind == ATTN_MHA && k.layer[2].kind == ATTN_SD &&
                       k.layer[5].kind == ATTN_SD && k.layer[6].kind == ATTN_LIN &&
                       k.layer[9].kind == ATTN_SDLIN && k.layer[9].head_size == 8 &&
                       k.layer[6].head_size == 64;
        CHECK(kinds_ok, "kinds: mha x2, sd x4, lin x3, sdlin 12x8 x3 parsed into the table");
        expect_warning("kinds sd, lin, sdlin", &k, 2, "attention width 96, not C = 768", NULL);
    }

    expect_error("non-divisor 5", "\n5*12", &d12, 0, 2, "5 heads do not divide C = 768", NULL);
    expect_error("non-divisor 7 after valid entries", "3*2 6*2\n7*8", &d12, 0, 2,
                 "7 heads do not divide C = 768", "explicit size HxD");
    const GPT2Config d24 = model_of("d24");
    expect_error("d24 non-divisor 3", "3*24", &d24, 0, 1, "3 heads do not divide C = 1024", NULL);
    const GPT2Config big = model_of("L24C1536H24");
    expect_error("L24C1536 non-divisor 5", "5*24", &big, 0, 1, "5 heads do not divide C = 1536",
                 NULL);

    /* layer count: too few names the last entry's line (comments after it do not count) */
    expect_error("too few layers", "3*2 6*2\n12*7\n# trailing comment\n\n", &d12, 0, 2,
                 "the table covers 11 layers", "the model has 12");
    expect_error("too few layers (one line)", "12*6", &d12, 0, 1, "the table covers 6 layers",
                 "the model has 12");
    expect_error("empty schedule", "# nothing\n", &d12, 0, 1, "the table covers 0 layers", NULL);
    /* An HxD entry is one layer: '4x4' written for '4*4' (4 heads on 4 layers) reads as one layer
     * of 4 heads of size 4, and the count message says how each such entry was read. */
    const GPT2Config l8 = model_of("L8C256H4");
    expect_error("'4x4' for '4*4': the count names how it was read", "1*2 2*2\n4x4\n", &l8, 0, 2,
                 "the table covers 5 layers; the model has 8 ('4x4' is 1 layer of 4 heads of size 4;",
                 "H*N is N layers of H heads)");
    expect_error("two HxD entries: each one's reading", "1*2 2x128*2 4x4", &l8, 0, 1,
                 "'2x128*2' is 2 layers of 2 heads of size 128, '4x4' is 1 layer of 4 heads of size 4;",
                 "the table covers 5 layers");
    {
        LayerTable t;
        table_parse("12*6", "sched.txt", &d12, 0, &t);
        CHECK(t.has_error && strstr(t.error, "the model has 12") != NULL && strchr(t.error, '(') == NULL,
              "a count error without an HxD entry has no reading note: \"%s\"", t.error);
    }
    /* too many names the entry that overflows */
    expect_error("too many layers", "3*2 6*2\n12*8\n12\n12\n", &d12, 0, 3,
                 "entry '12' brings the table to 13 layers", "the model has 12");
    expect_error("too many layers (one entry)", "12*13", &d12, 0, 1,
                 "entry '12*13' brings the table to 13 layers", NULL);
    expect_error("too many layers (huge repeat)", "3*2\n12*1000000000", &d12, 0, 2,
                 "the model has 12", NULL);

    /* monotonicity: the error names the first decreasing layer and its line */
    expect_error("decreasing", "12*6 6*3 3*3", &d12, 0, 1, "layer 6 has 6 heads after 12 at layer 5",
                 "runs with -layers FILE");
    expect_error("decreasing (multi-line)", "12*6\n6*3\n3*3\n", &d12, 0, 2,
                 "must not decrease with depth", "-layers FILE");

    /* the same as -layers reads it (no Prism rules): accepted, no warning, kept as written */
    LayerTable s;
    int ok = table_parse("12*6\n6*3\n3*3\n", "sched.txt", &d12, 1, &s);
    CHECK(ok == 1 && !s.has_error && s.n_warnings == 0,
          "decreasing, as -layers: accepted without warnings (error: \"%s\", %d warnings)", s.error, s.n_warnings);
    CHECK(s.n_layers == 12 && s.layer[0].n_head == 12 && s.layer[11].n_head == 3,
          "decreasing, as -layers: table kept as written (12 ... 3)");
    /* rejected by -prism, it still carries the other rules' warnings (the monotonicity check is last) */
    LayerTable r;
    ok = table_parse("12*6\n6*3\n3*3\n", "sched.txt", &d12, 0, &r);
    CHECK(!ok && find_warning(&r, "the last layer has 3 heads") >= 0,
          "decreasing, as -prism: the error, and the warning that the last layer is not at the base");
}

static void test_warnings(void) {
    const GPT2Config d12 = model_of("d12");
    LayerTable s;

    /* last layer not at the base head count (6*12 also has no base layers and a run of 12) */
    s = expect_ok("last layer not base", "6*12", &d12, 0, 3);
    expect_warning("last layer not base", &s, 1, "the last layer has 6 heads", "base is 12");
    s = expect_ok("last layer not base (own line)", "3*2\n6*2\n# c\n6*8\n", &d12, 0, 3);
    expect_warning("last layer not base (own line)", &s, 4, "the last layer has 6 heads", NULL);
    expect_warning("no base layers", &s, 4, "only 0 of 12 layers use the base 12 heads", NULL);

    /* fewer than L/2 base layers: named at the last layer's line */
    s = expect_ok("wide too deep", "3*4\n6*4\n12*4\n", &d12, 0, 1);
    expect_warning("wide too deep", &s, 3, "only 4 of 12 layers use the base 12 heads", "half");
    s = expect_ok("exactly L/2 base layers", "3*3 6*3 12*6", &d12, 0, 0);

    /* runs of a non-base width outside 2-4, named at the run's first line */
    s = expect_ok("run of 1", "3\n6*2\n12*9", &d12, 0, 1);
    expect_warning("run of 1", &s, 1, "a run of 1 layer with 3 heads", "2-4 layers");
    s = expect_ok("run of 5", "6*5\n12*7", &d12, 0, 1);
    expect_warning("run of 5", &s, 1, "a run of 5 layers with 6 heads", "2-4 layers");
    s = expect_ok("run of 1 in the middle", "3*2\n6\n12*9", &d12, 0, 1);
    expect_warning("run of 1 in the middle", &s, 2, "a run of 1 layer with 6 heads", NULL);
    s = expect_ok("runs of 4 and 2", "3*2 6*4 12*6", &d12, 0, 0);
    s = expect_ok("run of 4 then base", "6*4 12*8", &d12, 0, 0);
    /* a jump of more than 2x between layers (doc/prism.md "Candidate schedules and negative controls" control J) */
    s = expect_ok("jump 3 -> 12", "3*4 12*8", &d12, 0, 1);
    expect_warning("jump 3 -> 12", &s, 1, "layer 4 jumps from 3 to 12 heads", "at most 2x");
}

/* ---------------------------------------------------------------------------------------------- */
/* The files in prism/schedules and prism/schedules/controls. */

/* The line of the first entry of a file: the first line that is not blank or a comment. */
static int first_entry_line(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char buf[1024];
    int line = 0, found = -1;
    while (fgets(buf, sizeof(buf), f)) {
        line++;
        const char *p = buf;
        while (*p == ' ' || *p == '\t') p++;
        if (*p != '#' && *p != '\n' && *p != '\0') { found = line; break; }
    }
    fclose(f);
    return found;
}

/* The model a file name implies: d12_* -> d12, d24_* -> d24, L<l>C<c>_* -> L<l>C<c>H<c/64> (the
 * presets' base heads are 64 wide: L24C1536_* -> L24C1536H24, L8C256_* -> L8C256H4). */
static int model_for_file(const char *name, GPT2Config *c) {
    if (strncmp(name, "d12_", 4) == 0) { *c = model_of("d12"); return 1; }
    if (strncmp(name, "d24_", 4) == 0) { *c = model_of("d24"); return 1; }
    int L = 0, C = 0, used = 0;
    if (sscanf(name, "L%dC%d_%n", &L, &C, &used) == 2 && used > 0 && C % 64 == 0) {
        char desc[64];
        snprintf(desc, sizeof(desc), "L%dC%dH%d", L, C, C / 64);
        *c = model_of(desc);
        return 1;
    }
    return 0;
}

static int cmp_name(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

/* Sorted *.txt names (at most 63 characters) of a directory; returns the count, -1 if unreadable. */
static int list_txt(const char *dir, char names[][64], int cap) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < cap) {
        size_t len = strlen(e->d_name);
        if (len > 4 && len < 64 && strcmp(e->d_name + len - 4, ".txt") == 0) {
            memcpy(names[n], e->d_name, len + 1);
            n++;
        }
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof(names[0]), cmp_name);
    return n;
}

static void test_preset_files(void) {
    static char names[64][64];
    const char *dir = "prism/schedules";
    int n = list_txt(dir, names, 64);
    CHECK(n >= 16, "%s: %d preset files found (run from the repository root)", dir, n);
    int n_d12 = 0, n_d24 = 0, n_big = 0, n_other = 0;
    for (int i = 0; i < n; i++) {
        char path[128];
        snprintf(path, sizeof(path), "%s/%.63s", dir, names[i]);
        GPT2Config m;
        if (!model_for_file(names[i], &m)) {
            CHECK(0, "%s: no model implied by the name", path);
            continue;
        }
        n_d12 += m.num_layers == 12;
        n_d24 += m.channels == 1024;
        n_big += m.channels == 1536;
        n_other += m.num_layers != 12 && m.channels != 1024 && m.channels != 1536;
        LayerTable s;
        int ok = table_load(path, &m, 0, &s);
        CHECK(ok == 1 && !s.has_error && s.n_warnings == 0,
              "%s: loads against L %d C %d with 0 warnings (error \"%s\", %d warnings%s%s)", path,
              m.num_layers, m.channels, s.error, s.n_warnings, s.n_warnings ? ": " : "",
              s.n_warnings ? s.warning[0] : "");
        if (!ok) continue;
        /* a valid preset is non-decreasing, ends at the base and keeps A_l = C */
        int mono = 1, width = 1;
        for (int l = 0; l < m.num_layers; l++) {
            if (l > 0 && s.layer[l].n_head < s.layer[l - 1].n_head) mono = 0;
            if (attn_width(&s.layer[l]) != m.channels) width = 0;
        }
        CHECK(mono && width && s.layer[m.num_layers - 1].n_head == m.num_heads,
              "%s: non-decreasing, A_l = C, last layer at base %d heads", path, m.num_heads);
    }
    CHECK(n_d12 >= 5 && n_d24 >= 4 && n_big >= 4, "presets: %d d12, %d d24, %d L24C1536, %d other",
          n_d12, n_d24, n_big, n_other);
}

static void test_control_files(void) {
    static char all[64][64], names[64][64], others[64][64];
    const char *dir = "prism/schedules/controls";
    const int n_all = list_txt(dir, all, 64);
    int n = 0, n_others = 0;
    for (int i = 0; i < n_all; i++) {
        if (strncmp(all[i], "d12_", 4) == 0) memcpy(names[n++], all[i], 64);
        else memcpy(others[n_others++], all[i], 64);
    }
    CHECK(n == 5, "%s: %d d12 control files found (expected 5: constant_wide, jump, reversed, "
          "wide_too_deep, zigzag)", dir, n);
    /* The small models' controls (L8C256H4: all five; L4C128H2: all but jump, which needs a width
     * between the widest and the base): each breaks the rule its name says, for the model its
     * name implies. */
    CHECK(n_others == 9, "%s: %d controls of the small models (expected 5 L8C256_ + 4 L4C128_)", dir, n_others);
    for (int i = 0; i < n_others; i++) {
        char path[128];
        snprintf(path, sizeof(path), "%s/%.63s", dir, others[i]);
        GPT2Config m;
        if (!model_for_file(others[i], &m)) {
            CHECK(0, "%s: the file name names no model", path);
            continue;
        }
        LayerTable s, su;
        const int ok = table_load(path, &m, 0, &s);
        const int oku = table_load(path, &m, 1, &su);
        const char *want = strstr(others[i], "constant_wide") ? "the last layer has"
                           : strstr(others[i], "wide_too_deep") ? "layers use the base"
                           : "at most 2x";
        if (strstr(others[i], "reversed") || strstr(others[i], "zigzag"))
            CHECK(!ok && strstr(s.error, "must not decrease") && oku && su.n_warnings == 0,
                  "%s: rejected by -prism (%s), loads with -layers without warnings", path, s.error);
        else
            CHECK(ok && find_warning(&s, want) >= 0, "%s: loads, warning '%s' (%d warnings)", path, want,
                  s.n_warnings);
    }
    const GPT2Config d12 = model_of("d12");
    /* one bit per expected control, so a missing one is not hidden by a duplicate of another */
    enum { C_REVERSED = 1, C_ZIGZAG = 2, C_CONSTANT_WIDE = 4, C_WIDE_TOO_DEEP = 8, C_JUMP = 16, C_ALL = 31 };
    int seen = 0;
    for (int i = 0; i < n; i++) {
        char path[128], pre[160];
        snprintf(path, sizeof(path), "%s/%.63s", dir, names[i]);
        const int line = first_entry_line(path);
        snprintf(pre, sizeof(pre), "%s:%d: ", path, line);
        GPT2Config m;
        CHECK(model_for_file(names[i], &m) && m.num_layers == 12, "%s: a d12 control", path);
        LayerTable s, su;
        const int ok = table_load(path, &d12, 0, &s);
        const int oku = table_load(path, &d12, 1, &su);
        if (strstr(names[i], "reversed") || strstr(names[i], "zigzag")) {
            seen |= strstr(names[i], "reversed") ? C_REVERSED : C_ZIGZAG;
            /* breaks monotonicity: an error under -prism, naming -layers; -layers loads it */
            CHECK(!ok && strncmp(s.error, pre, strlen(pre)) == 0 &&
                      strstr(s.error, "must not decrease") && strstr(s.error, "-layers FILE"),
                  "%s: rejected by -prism: \"%s\"", path, s.error);
            CHECK(oku && !su.has_error && su.n_warnings == 0, "%s: loads with -layers, no warning", path);
            if (strstr(names[i], "reversed")) {
                CHECK(strstr(s.error, "layer 6 has 6 heads after 12 at layer 5") != NULL,
                      "%s: names layer 6", path);
                CHECK(find_warning(&s, "the last layer has 3 heads") >= 0,
                      "%s: -prism also warns that the last layer is not at the base", path);
            } else {
                CHECK(strstr(s.error, "layer 2 has 3 heads after 12 at layer 1") != NULL,
                      "%s: names layer 2", path);
                /* breaks run length too: runs of 1 at 3 heads (runs of the base 12 are fine) */
                int w3 = find_warning(&s, "a run of 1 layer with 3 heads");
                int w12 = find_warning(&s, "a run of 1 layer with 12 heads");
                CHECK(w3 >= 0 && w12 < 0, "%s: -prism warns about runs of 1 at 3 heads, not at "
                      "the base 12", path);
                CHECK(w3 >= 0 && strncmp(s.warning[w3], pre, strlen(pre)) == 0,
                      "%s: run warning starts '%s'", path, pre);
            }
        } else if (strstr(names[i], "constant_wide")) {
            seen |= C_CONSTANT_WIDE;
            CHECK(ok && s.n_warnings >= 1, "%s: loads checked, with warnings (%d)", path,
                  s.n_warnings);
            int w = find_warning(&s, "the last layer has 6 heads; the model's base is 12");
            CHECK(w >= 0 && strncmp(s.warning[w], pre, strlen(pre)) == 0,
                  "%s: warns '%s...the last layer has 6 heads; the model's base is 12'", path, pre);
        } else if (strstr(names[i], "wide_too_deep")) {
            seen |= C_WIDE_TOO_DEEP;
            int w = find_warning(&s, "only 4 of 12 layers use the base 12 heads");
            CHECK(ok && s.n_warnings == 1 && w >= 0 && strncmp(s.warning[w], pre, strlen(pre)) == 0,
                  "%s: loads checked with exactly the warning '%sonly 4 of 12 layers ...' (%d "
                  "warnings)", path, pre, s.n_warnings);
        } else if (strstr(names[i], "jump")) {
            seen |= C_JUMP;
            /* breaks "smoothness" (256 -> 64 with no 128 step, doc/prism.md "Candidate schedules and negative controls"): a warning */
            int w = find_warning(&s, "layer 2 jumps from 3 to 12 heads");
            CHECK(ok && !s.has_error && s.n_warnings == 1 && w >= 0 &&
                      strstr(s.warning[w], "at most 2x") != NULL,
                  "%s: loads checked with exactly the jump warning (%d warnings)", path, s.n_warnings);
        } else {
            CHECK(0, "%s: unknown control (no expectation written for it)", path);
        }
    }
    CHECK(seen == C_ALL, "all 5 controls checked: reversed, zigzag, constant_wide, wide_too_deep, jump "
          "(seen mask 0x%x of 0x%x)", seen, C_ALL);

    LayerTable s;
    int ok = table_load("prism/schedules/controls/no_such_file.txt", &d12, 0, &s);
    CHECK(!ok && s.has_error && strstr(s.error, "no_such_file.txt: cannot read the layer table"),
          "missing file: \"%s\"", s.error);
}

/* A path longer than a message buffer: the messages keep their text (the path is cut), and
 * nothing is written past the buffers (a 700-byte path used to push the text out of them). */
static void test_long_path(void) {
    GPT2Config d12;
    char msg[256];
    config_from_descriptor("d12", &d12, msg, sizeof(msg));
    char path[720];
    memset(path, 'p', sizeof(path) - 1);
    path[sizeof(path) - 1] = '\0';
    LayerTable *s = (LayerTable *)xmalloc(sizeof(LayerTable));
    int ok = table_parse("3 6*2 12*9\n", path, &d12, 0, s);
    const char *w = s->n_warnings > 0 ? s->warning[0] : "";
    CHECK(ok && s->n_warnings >= 1 && strlen(w) < LAYER_TABLE_MAX_MSG && strncmp(w, "...", 3) == 0 &&
              strstr(w, "ppp:1: ") != NULL && strstr(w, "Prism holds each non-base width") != NULL,
          "a 719-byte path: the warning keeps its text, the path cut to its end (%zu bytes)", strlen(w));
    ok = table_parse("12*11\n", path, &d12, 0, s);
    CHECK(!ok && strlen(s->error) < LAYER_TABLE_MAX_MSG && strstr(s->error, "the table covers 11 layers") != NULL,
          "a 719-byte path: the error keeps its text (%zu bytes)", strlen(s->error));
    /* twenty HxD entries: the readings stop at the first few ("...") and the line keeps its end */
    GPT2Config d24;
    config_from_descriptor("d24", &d24, msg, sizeof(msg));
    char text[20 * 6 + 1] = "";
    for (int i = 0; i < 20; i++) strcat(text, "16x64 ");
    ok = layer_table_parse(text, path, &d24, s);
    const size_t len = strlen(s->error);
    CHECK(!ok && len < LAYER_TABLE_MAX_MSG - 1 && strstr(s->error, "the table covers 20 layers; the model has 24 ('16x64'") != NULL &&
              strstr(s->error, "size 64, ...; H*N is N layers of H heads)") == s->error + len - 41,
          "a 719-byte path and 20 HxD entries: the first readings, '...', the whole end (%zu bytes)", len);
    free(s);
}

int main(void) {
    test_long_path();
    test_valid();
    test_errors();
    test_warnings();
    test_preset_files();
    test_control_files();
    return test_finish();
}
