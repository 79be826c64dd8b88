/* test/fuzz/fuzz_layer_table.c: the layer-table parser (llmc/layer_table.h) and Prism's rules
 * (prism/rules.h) on arbitrary text, against d12 and a 4-layer model, then the table applied and
 * the model it describes validated and laid out (test/fuzz/fuzz.h). */
#include "fuzz.h"

#include "../../llmc/layer_kind.h"
#include "../../llmc/layer_table.h"
#include "../../llmc/param_layout.h"
#include "../../prism/rules.h"
#include "../../kinds/registry.h"

static LayerTable table; /* large (its messages): one, reused */
static char *text;

static void free_text(void) {
    free(text);
    text = NULL;
}

static int fuzz_one(const char *path, const uint8_t *data, size_t size) {
    fuzz_cleanup = free_text;
    int accepted = 0;
    const char *models[2] = {"d12", "tiny"};
    for (int i = 0; i < 2; i++) {
        GPT2Config c;
        char msg[512];
        if (!config_from_descriptor(models[i], &c, msg, sizeof(msg))) abort();
        LayerTable *t = &table;
        /* the file reader (size, NUL bytes) for the first model, the text parser for the second */
        int ok = i == 0 ? layer_table_load(path, &c, t) : 0;
        if (i == 1) {
            text = (char *)xmalloc(size + 1);
            memcpy(text, data, size);
            text[size] = '\0';
            ok = layer_table_parse(text, "fuzz", &c, t);
            free_text();
        }
        if (ok) (void)prism_rules_check(t, "fuzz", &c); /* its verdict aside: -layers applies any parsed table */
        if (ok) {
            layer_table_apply(t, &c);
            if (config_validate(&c, msg, sizeof(msg))) {
                ParamLayout p;
                param_layout_init(&p, &c);
                accepted |= p.total > 0;
            }
        }
    }
    return accepted;
}
