# tests/fuzz/fuzz.mk: `make fuzz` builds the libFuzzer harnesses (ASan + UBSan) of every reader of untrusted bytes and
# runs each for FUZZ_SECONDS; FUZZ_TARGETS picks some (`make fuzz FUZZ_TARGETS="npy weights" FUZZ_SECONDS=120`).
#   onnx         the ONNX importer on any bytes (seeds: node test models, tests/data/onnx_*, nesting seeds; onnx.dict)
#   mutate       valid models (tests/data/onnx_good, models/, the node tests) with edits to attributes, dims, types
#                and wiring, through import, the -O pipeline and the kernel IR
#   npy          the .npy reader                       (seeds: tests/data/**/*.npy)
#   safetensors  the safetensors reader                 (seeds: tests/fuzz/seeds/safetensors)
#   text         the IR text parser, printed back       (seeds: tests/ir/*.txt, tests/fuzz/seeds/text)
#   grad         reverse and forward mode on any text graph that verifies (seeds: tests/fuzz/seeds/grad, tests/ir)
#   weights      the weights file loader and the packed-weight header checks of the GEMM and conv
# Crashers land in $(FUZZ_B)/<target>/crash-*; keep each as a regression input under tests/data/ (tests/data/onnx_bad/
# for the importer, tests/data/fuzz/<target>/ for the others), replayed by tests/unit/test_fuzz_regress.c.
# The deep-nesting seeds (tests/fuzz/seeds/onnx_nest: TypeProto sequences and If subgraphs thousands deep) crash
# the importer until it bounds nesting; FUZZ_NEST=0 leaves them out.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= onnx mutate npy safetensors text weights grad
FUZZ_NEST    ?= 1
FUZZ_PARALLEL ?= 0
# seconds one input may take before it counts as a hang: a 1,000-step GRU from the mutator plans in 3.3 s of
# CPU under the sanitizers and took 13 s of wall time with six fuzzers and a test suite on 2 cores
FUZZ_TIMEOUT ?= 30
FUZZ_B       ?= build-fuzz
FUZZ_CC      ?= clang
FUZZ_FLAGS   := -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1
FUZZ_NODE_DIR ?= $(or $(ONNX_NODE_DIR),build/onnx-node-tests)
FUZZ_RT      := $(filter-out runtime/driver.c runtime/cuda_driver.c,$(wildcard runtime/*.c runtime/conv/*.c runtime/gemm/*.c))
FUZZ_HDRS    := $(wildcard ir/*.h ir/*.def frontend/*.h frontend/*.def runtime/*.h runtime/conv/*.h runtime/conv/*.def runtime/gemm/*.h runtime/gemm/*.def passes/*.h passes/*.def codegen/kir*.h codegen/calls.def codegen/autotune.h)
FUZZ_LINK    := -lprotobuf-c -lm -lpthread -ldl
FUZZ_RUN     := -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -timeout=$(FUZZ_TIMEOUT) -print_final_stats=1

$(FUZZ_B)/gen/onnx.pb-c.c: $(ONNX_PROTO)
	@mkdir -p $(FUZZ_B)/gen
	protoc-c --c_out=$(FUZZ_B)/gen -I$(dir $(ONNX_PROTO)) $(ONNX_PROTO)

# every source compiled once with the fuzzing flags, each harness linked from the objects it needs
$(FUZZ_B)/obj/%.o: %.c $(FUZZ_HDRS) $(FUZZ_B)/gen/onnx.pb-c.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -std=c11 -D_GNU_SOURCE $(FUZZ_FLAGS) -I. -I$(FUZZ_B)/gen -c $< -o $@
$(FUZZ_B)/obj/gen/onnx.pb-c.o: $(FUZZ_B)/gen/onnx.pb-c.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -std=c11 $(FUZZ_FLAGS) -I$(FUZZ_B)/gen -c $< -o $@
FUZZ_OBJ = $(patsubst %.c,$(FUZZ_B)/obj/%.o,$(1))
# runtime/text.c: ir's errors and origins escape a model's names with it
FUZZ_FRONT_O := $(call FUZZ_OBJ,$(wildcard ir/*.c frontend/*.c) runtime/text.c) $(FUZZ_B)/obj/gen/onnx.pb-c.o
FUZZ_RT_O    := $(call FUZZ_OBJ,$(FUZZ_RT))
FUZZ_PASS_O  := $(call FUZZ_OBJ,$(wildcard passes/*.c codegen/kir*.c) codegen/autotune.c)

$(FUZZ_B)/fuzz_onnx $(FUZZ_B)/fuzz_text $(FUZZ_B)/fuzz_safetensors: $(FUZZ_B)/fuzz_%: $(FUZZ_B)/obj/tests/fuzz/fuzz_%.o $(FUZZ_FRONT_O)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $^ $(FUZZ_LINK)
$(FUZZ_B)/fuzz_mutate $(FUZZ_B)/fuzz_grad: $(FUZZ_B)/fuzz_%: $(FUZZ_B)/obj/tests/fuzz/fuzz_%.o $(FUZZ_FRONT_O) $(FUZZ_PASS_O) $(FUZZ_RT_O)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $^ $(FUZZ_LINK)
$(FUZZ_B)/fuzz_npy $(FUZZ_B)/fuzz_weights: $(FUZZ_B)/fuzz_%: $(FUZZ_B)/obj/tests/fuzz/fuzz_%.o $(FUZZ_RT_O)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $^ $(FUZZ_LINK)

# seeds per target in $(FUZZ_B)/<target>/seeds, the growing corpus in $(FUZZ_B)/<target>/corpus
fuzz-seeds:
	@for t in $(FUZZ_TARGETS); do mkdir -p $(FUZZ_B)/$$t/seeds $(FUZZ_B)/$$t/corpus; done
	@if [ -d $(FUZZ_B)/onnx ]; then \
	  for f in $(FUZZ_NODE_DIR)/*/model.onnx; do [ -f "$$f" ] && cp "$$f" "$(FUZZ_B)/onnx/seeds/$$(basename $$(dirname $$f)).onnx"; done; \
	  cp tests/data/onnx_bad/* tests/data/onnx_good/*.onnx tests/fuzz/seeds/onnx/* $(FUZZ_B)/onnx/seeds/ 2>/dev/null; \
	  if [ "$(FUZZ_NEST)" = 1 ]; then cp tests/fuzz/seeds/onnx_nest/* $(FUZZ_B)/onnx/seeds/ 2>/dev/null; fi; fi; true
	@[ -d $(FUZZ_B)/npy ] && find tests/data -name '*.npy' -size -64k | head -n 400 | \
	  while read -r f; do cp "$$f" "$(FUZZ_B)/npy/seeds/$$(echo "$$f" | tr / _)"; done; true
	@[ -d $(FUZZ_B)/safetensors ] && cp tests/fuzz/seeds/safetensors/* $(FUZZ_B)/safetensors/seeds/ 2>/dev/null; true
	@[ -d $(FUZZ_B)/text ] && { for f in tests/ir/*.txt tests/fuzz/seeds/text/*; do [ -f "$$f" ] && cp "$$f" $(FUZZ_B)/text/seeds/; done; }; true
	@[ -d $(FUZZ_B)/weights ] && cp tests/fuzz/seeds/weights/* $(FUZZ_B)/weights/seeds/ 2>/dev/null; true
	@[ -d $(FUZZ_B)/grad ] && { for f in tests/fuzz/seeds/grad/* tests/ir/*.txt; do [ -f "$$f" ] && cp "$$f" $(FUZZ_B)/grad/seeds/; done; }; true
	@[ -d $(FUZZ_B)/mutate ] && printf '\0\0' >$(FUZZ_B)/mutate/seeds/plain; true

# FUZZ_PARALLEL=1: every target at once, each writing $(FUZZ_B)/<target>/fuzz.log (on 2 cores each gets a
# share of them: say so with the figures); the exit status is the worst of them
fuzz: | $(SETUP_STAMP)
	$(MAKE) $(addprefix $(FUZZ_B)/fuzz_,$(FUZZ_TARGETS))
	$(MAKE) fuzz-seeds
	@set -e; pids=""; for t in $(FUZZ_TARGETS); do \
	  echo "== fuzz $$t for $(FUZZ_SECONDS) s"; \
	  extra=""; [ $$t = onnx ] && extra="-dict=$(CURDIR)/tests/fuzz/onnx.dict -max_len=400000"; \
	  [ $$t = mutate ] && extra="-max_len=512"; \
	  if [ "$(FUZZ_PARALLEL)" = 1 ]; then \
	    ( cd $(FUZZ_B)/$$t && PRIMC_FUZZ_MODELS=$(CURDIR)/tests/data/onnx_good:$(CURDIR)/models:$(abspath $(FUZZ_NODE_DIR)) \
	      ../fuzz_$$t $(FUZZ_RUN) $$extra corpus seeds >fuzz.log 2>&1 ) & pids="$$pids $$!"; \
	  else \
	    ( cd $(FUZZ_B)/$$t && PRIMC_FUZZ_MODELS=$(CURDIR)/tests/data/onnx_good:$(CURDIR)/models:$(abspath $(FUZZ_NODE_DIR)) \
	      ../fuzz_$$t $(FUZZ_RUN) $$extra corpus seeds ) || exit 1; \
	  fi; \
	done; \
	bad=0; for p in $$pids; do wait $$p || bad=1; done; \
	for t in $(FUZZ_TARGETS); do [ -f $(FUZZ_B)/$$t/fuzz.log ] && [ -n "$$pids" ] && \
	  echo "$$t: $$(grep -E '^stat::number_of_executed_units' $(FUZZ_B)/$$t/fuzz.log | tail -n 1) $$(grep -cE '^==[0-9]+==ERROR|^SUMMARY' $(FUZZ_B)/$$t/fuzz.log) findings"; done; \
	exit $$bad
