# mk/sd_tools.mk: the S-D diagnostics and surgery tools and their tests (doc/sd_tools.md).
# Included by the top Makefile, which defines CC, CFLAGS, LDLIBS, PYTHON and HEADERS (every header
# of llmc/, prism/, sd_attention/ and kinds/).
#
#   make sd_spectrum    ./sd_spectrum model.bin [-heads 1] [-csv F] [-json F] [-png F]
#   make sd_surgery     ./sd_surgery -e model.bin -o out.bin -op linearize|scalar_d|shrink ...
#
# Eigen/singular values come from LAPACK through LAPACKE (Debian: liblapacke-dev).
SD_TOOLS_HEADERS = $(HEADERS) sd_attention/spectrum.h sd_attention/surgery.h
SD_TOOLS_LIBS = -llapacke -llapack -lblas $(LDLIBS)

ALL_BINS += sd_spectrum sd_surgery
TEST_BINS += build/test_spectrum build/test_surgery

sd_spectrum: sd_spectrum.c $(SD_TOOLS_HEADERS)
	$(CC) $(CFLAGS) $< -o $@ $(SD_TOOLS_LIBS)

sd_surgery: sd_surgery.c $(SD_TOOLS_HEADERS)
	$(CC) $(CFLAGS) $< -o $@ $(SD_TOOLS_LIBS)

build/test_spectrum: test/test_spectrum.c $(SD_TOOLS_HEADERS) $(TEST_HEADERS) | build
	$(CC) $(CFLAGS) $< -o $@ $(SD_TOOLS_LIBS)

build/test_surgery: test/test_surgery.c $(SD_TOOLS_HEADERS) $(TEST_HEADERS) | build
	$(CC) $(CFLAGS) $< -o $@ $(SD_TOOLS_LIBS)
