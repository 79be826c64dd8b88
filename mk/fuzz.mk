# mk/fuzz.mk: fuzz targets of every file reader (test/fuzz/; doc/verification.md "Hostile files and faults").
#
#   make fuzz [FUZZ_SECONDS=300] [FUZZ_TARGETS="checkpoint state"]   libFuzzer with ASan + UBSan,
#                     each target from a working copy of its seed corpus; crashes are written to
#                     build/fuzz/crashes/<target>/ and the run fails naming them
#   make test         replays the corpus (build/fuzz/replay_<target>: gcc, ASan + UBSan) and runs
#                     each libFuzzer target for FUZZ_SMOKE_SECONDS (test/test_fuzz.sh)
#
# libFuzzer comes with clang (Debian: clang, libclang-rt-14-dev).
FUZZ_TARGETS ?= checkpoint state shard tokenizer evalfile layer_table
FUZZ_SECONDS ?= 300
FUZZ_CLANG ?= $(shell command -v clang 2>/dev/null || echo clang)
FUZZ_SAN = -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_FLAGS = -std=c11 -D_GNU_SOURCE -g -O1 -Wall -Wextra -Wno-unknown-pragmas $(FUZZ_SAN)
FUZZ_DEPS = test/fuzz/fuzz.h $(HEADERS)

build/fuzz/fuzz_%: test/fuzz/fuzz_%.c $(FUZZ_DEPS)
	@mkdir -p $(dir $@)
	$(FUZZ_CLANG) $(FUZZ_FLAGS) -fsanitize=fuzzer -DFUZZ_LIBFUZZER $< -o $@ -lm
build/fuzz/replay_%: test/fuzz/fuzz_%.c $(FUZZ_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(FUZZ_FLAGS) $< -o $@ -lm

FUZZ_REPLAY_BINS = $(addprefix build/fuzz/replay_,$(FUZZ_TARGETS))
FUZZ_BINS = $(addprefix build/fuzz/fuzz_,$(FUZZ_TARGETS))
# the libFuzzer runtime, if this clang has it (else make test replays the corpus only, and says so)
HAVE_LIBFUZZER := $(if $(wildcard $(shell $(FUZZ_CLANG) -print-file-name=libclang_rt.fuzzer-$(shell uname -m).a 2>/dev/null)),1,)
TEST_BINS += $(FUZZ_REPLAY_BINS) $(if $(HAVE_LIBFUZZER),$(FUZZ_BINS),)

.PHONY: fuzz fuzz_bins
fuzz_bins: $(FUZZ_BINS) $(FUZZ_REPLAY_BINS)
fuzz: fuzz_bins
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_TARGETS="$(FUZZ_TARGETS)" bash test/fuzz/run.sh
