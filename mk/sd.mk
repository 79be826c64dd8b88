# mk/sd.mk: tests of S-D attention, linear attention and -ln 0 (doc/methods.md "S–D attention").
TEST_BINS += build/test_sd_cpu_fd build/test_sd_stability build/test_sd_layout

build/test_sd_cpu_fd: test/test_sd_cpu_fd.c $(HEADERS) $(TEST_HEADERS) | build
	$(CC) $(CFLAGS_EXACT) $< -o $@ $(LDLIBS)

build/test_sd_stability: test/test_sd_stability.c $(HEADERS) $(TEST_HEADERS) | build
	$(CC) $(CFLAGS) $< -o $@ -llapacke $(LDLIBS)
