# mk/eval.mk: the zero-shot evaluator and its eval files (doc/evals.md); included by the Makefile.
#
#   make eval_gpt2    the CPU evaluator: ./eval_gpt2 -e model.bin -tasks all
#   make evals        write the five eval files into dev/data/<task>/ from ../shared/data/eval
#   make eval [CKPT=model.bin] [EVAL_N=100]   a quick zero-shot look: the first EVAL_N examples of
#                     each of the five tasks (CKPT defaults to the checkpoint of make train)
ALL_BINS += eval_gpt2
TEST_BINS += build/test_evalloader

EVAL_FILES = dev/data/hellaswag/hellaswag_val.bin dev/data/piqa/piqa_val.bin \
             dev/data/arc_easy/arc_easy_test.bin dev/data/winogrande/winogrande_val.bin \
             dev/data/lambada/lambada_test.bin

.PHONY: evals eval
CKPT ?= out/shakespeare_prism/model_00000300.bin
EVAL_N ?= 100

eval_gpt2: eval_gpt2.c $(HEADERS)
	$(CC) $(CFLAGS) $< -o $@ $(LDLIBS)

evals: $(EVAL_FILES)

eval: eval_gpt2 evals
	@test -f "$(CKPT)" || { echo "error: CKPT=$(CKPT): no such checkpoint (make train writes this one; or set CKPT=...)" >&2; exit 1; }
	./eval_gpt2 -e '$(CKPT)' -tasks all -n $(EVAL_N)

# each file is rewritten when its writer or the shared format code changes
dev/data/hellaswag/hellaswag_val.bin: dev/data/hellaswag.py dev/data/eval_common.py dev/data/data_common.py
	$(PYTHON) $<
dev/data/piqa/piqa_val.bin: dev/data/piqa.py dev/data/eval_common.py dev/data/data_common.py
	$(PYTHON) $<
dev/data/arc_easy/arc_easy_test.bin: dev/data/arc_easy.py dev/data/eval_common.py dev/data/data_common.py
	$(PYTHON) $<
dev/data/winogrande/winogrande_val.bin: dev/data/winogrande.py dev/data/eval_common.py dev/data/data_common.py
	$(PYTHON) $<
dev/data/lambada/lambada_test.bin: dev/data/lambada.py dev/data/eval_common.py dev/data/data_common.py
	$(PYTHON) $<
