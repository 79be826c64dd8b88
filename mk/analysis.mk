# mk/analysis.mk: the attention-distance tool and the analysis tests (doc/attention_distance.md).
#
#   make attn_distance     ./attn_distance -e model.bin -j VAL_SHARD ... (doc/attention_distance.md)
#
# Included by the top Makefile, which defines CC, CFLAGS, LDLIBS and HEADERS (every header of
# llmc/, prism/, sd_attention/ and kinds/, so prism/attn_stats.h is a dependency already). The C test build/test_attn_stats
# is built by the top Makefile's pattern rule build/%: test/%.c.
ALL_BINS += attn_distance
TEST_BINS += build/test_attn_stats

attn_distance: attn_distance.c $(HEADERS)
	$(CC) $(CFLAGS) $< -o $@ $(LDLIBS)
