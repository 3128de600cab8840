# Makefile: builds the primc compiler, its runtime library and the test runner.
CC      ?= cc
LLVM_CONFIG ?= llvm-config-19
OPT     ?= -O2
CFLAGS  ?= $(OPT) -g
WARN    := -std=c11 -Wall -Wextra -Werror -Wno-unused-parameter
B       := build
GEN     := $(B)/gen
ONNX_PROTO ?= /usr/include/onnx/onnx.proto
SAN     ?=
MAKEFLAGS += -j2

SETUP_STAMP := $(B)/.setup-ok
LLVM_CFLAGS  = $(shell $(LLVM_CONFIG) --cflags 2>/dev/null | sed 's/-D_GNU_SOURCE//')
LLVM_LDFLAGS = $(shell $(LLVM_CONFIG) --ldflags --libs 2>/dev/null)
ALL_CFLAGS := $(WARN) $(CFLAGS) $(SAN) -fPIC -D_GNU_SOURCE -I. -I$(GEN) -I/usr/local/cuda/include
LIBS     = $(LLVM_LDFLAGS) -lprotobuf-c -lm -ldl -lpthread

LIB_SRC := $(wildcard ir/*.c frontend/*.c passes/*.c codegen/*.c api/*.c)
RT_SRC  := $(wildcard runtime/*.c runtime/conv/*.c runtime/gemm/*.c)
TOOL_SRC := $(wildcard tools/*.c)
TEST_SRC := tests/test_main.c $(wildcard tests/unit/*.c)

LIB_OBJ  := $(LIB_SRC:%.c=$(B)/%.o) $(GEN)/onnx.pb-c.o
RT_OBJ   := $(RT_SRC:%.c=$(B)/%.o)
TOOL_OBJ := $(TOOL_SRC:%.c=$(B)/%.o)
TEST_OBJ := $(TEST_SRC:%.c=$(B)/%.o)

.PHONY: all setup test demo clean conformance fuzz check-asan models bench test-large
all: $(B)/primc $(B)/libprimc_rt.a $(B)/test_primc $(B)/libprimc.so

setup: $(SETUP_STAMP)
$(SETUP_STAMP): tools/setup.sh
	@mkdir -p $(B)
	bash tools/setup.sh
	@touch $@

$(GEN)/onnx.pb-c.c $(GEN)/onnx.pb-c.h: $(ONNX_PROTO) | $(SETUP_STAMP)
	@mkdir -p $(GEN)
	protoc-c --c_out=$(GEN) -I$(dir $(ONNX_PROTO)) $(ONNX_PROTO)

$(GEN)/onnx.pb-c.o: $(GEN)/onnx.pb-c.c
	$(CC) -std=c11 $(CFLAGS) $(SAN) -I$(GEN) -c $< -o $@

$(B)/%.o: %.c | $(SETUP_STAMP) $(GEN)/onnx.pb-c.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LLVM_CFLAGS) -MMD -MP -c $< -o $@

$(B)/libprimc.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(B)/libprimc_rt.a: $(RT_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The runtime for AArch64 (`--triple aarch64-linux-gnu` links against it: codegen/package.c) and a runner of the
# runtime's own unit tests (the kernel rows against their references) for qemu-aarch64, cross-built with Debian's
# gcc-aarch64-linux-gnu (tools/setup.sh installs it, and qemu-user that runs them: tests/suites/aarch64.sh)
AARCH64_CC ?= aarch64-linux-gnu-gcc
AARCH64_AR ?= aarch64-linux-gnu-ar
A64 := $(B)/aarch64
A64_RT_OBJ := $(RT_SRC:%.c=$(A64)/%.o)
A64_TEST_SRC := tests/test_main.c tests/unit/test_gemm.c tests/unit/test_gemm_rows.c tests/unit/test_conv_rows.c \
  tests/unit/test_dgemm.c tests/unit/test_igemm.c
A64_TEST_OBJ := $(A64_TEST_SRC:%.c=$(A64)/%.o)
all: $(A64)/libprimc_rt.a $(A64)/test_rt
$(A64)/%.o: %.c | $(SETUP_STAMP)
	@mkdir -p $(dir $@)
	$(AARCH64_CC) $(WARN) $(CFLAGS) -fPIC -D_GNU_SOURCE -I. -I/usr/local/cuda/include -MMD -MP -c $< -o $@

$(A64)/libprimc_rt.a: $(A64_RT_OBJ)
	@rm -f $@
	$(AARCH64_AR) rcs $@ $^

$(A64)/test_rt: $(A64_TEST_OBJ) $(A64)/libprimc_rt.a
	$(AARCH64_CC) -static -o $@ $(A64_TEST_OBJ) $(A64)/libprimc_rt.a -lm -lpthread

# the public C API (include/primc.h) as a shared library: api.o pulls in what it needs of the compiler and the
# runtime (codegen packs weights with the runtime's GEMM); the version script exports only the primc_model_*
# and other names of include/primc.h, so the runtime inside stays private to it
$(B)/libprimc.so: $(B)/api/api.o $(B)/libprimc.a $(B)/libprimc_rt.a api/libprimc.map
	$(CC) $(SAN) -shared -o $@ -Wl,--version-script=api/libprimc.map -Wl,-soname,libprimc.so $(B)/api/api.o \
	  $(B)/libprimc.a $(B)/libprimc_rt.a $(LIBS)

$(B)/primc: $(TOOL_OBJ) $(B)/libprimc.a $(B)/libprimc_rt.a
	$(CC) $(SAN) -o $@ $(TOOL_OBJ) $(B)/libprimc.a $(B)/libprimc_rt.a $(LIBS)

$(B)/test_primc: $(TEST_OBJ) $(B)/libprimc.a $(B)/libprimc_rt.a
	$(CC) $(SAN) -o $@ $(TEST_OBJ) $(B)/libprimc.a $(B)/libprimc_rt.a $(LIBS)

# gemm_bench, conv_ab and wgrad_ab are built too, so that a change to the kernels' interfaces cannot break them unnoticed
test: all $(B)/gemm_bench $(B)/conv_ab $(B)/wgrad_ab
	bash tests/run.sh

demo: all
	bash tools/demo.sh

clean:
	rm -rf $(B)

-include $(shell find $(B) -name '*.d' 2>/dev/null)

$(ONNX_PROTO): | $(SETUP_STAMP)
	@test -f $@ || { echo "missing $@ (Debian package libonnx-dev)"; exit 1; }

# the whole of `make test` (tests/run.sh: the unit binary and every suite) under AddressSanitizer and
# UndefinedBehaviorSanitizer, in its own build dir: primc, test_primc and libprimc_rt.a are instrumented, and the
# executables, shared libraries and embedding apps the suites link get the sanitizer runtime through PRIMC_LDFLAGS
# (codegen/package.c, tests/embed/run.sh), so compiled models run instrumented too
ASAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
check-asan: | $(SETUP_STAMP)
	$(MAKE) B=build-asan OPT=-O1 SAN="$(ASAN_FLAGS)" build-asan/test_primc build-asan/primc build-asan/libprimc_rt.a \
	  build-asan/libprimc.so build-asan/aarch64/libprimc_rt.a build-asan/aarch64/test_rt
	B=build-asan PRIMC_LDFLAGS="$(ASAN_FLAGS)" ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  bash tests/run.sh

-include tests/fuzz/fuzz.mk

# the large models of the zoo (models/large/) and the extended zoo (models/extended/: issue 25's families), not
# committed, exported with Debian's torch, with ORT references
models: all
	bash tools/setup.sh models
	/usr/bin/python3 models/export.py --large resnet18 resnet50 mobilenet_v2 efficientnet_b0 vit_tiny bert_base gpt2_block
	/usr/bin/python3 models/export.py --extended squeezenet1_1 densenet121 mnasnet1_0 shufflenet_v2 regnet_y_400mf \
	  textdet yolo_sppf audio_frontend wav2vec_features gpt2_small
	python3 models/refs.py

# primc against ONNX Runtime, PyTorch eager and torch.compile on every model present, plus roofline figures;
# then the precision builds against ONNX Runtime and OpenVINO (f32 and its default precision) on a ResNet-50
# and a BERT-base-sized encoder written without torch; run-time dims; training steps against PyTorch (in turn, then
# step by step in one process)
bench: all $(B)/gemm_bench $(B)/conv_ab $(B)/wgrad_ab $(B)/stream $(B)/corelat $(B)/coreshare
	bash tools/setup.sh bench
	python3 bench/run.py --threads 1,2
	bash bench/roofline.sh
	python3 bench/gen_resnet.py $(B)/bench-models/resnet50 --depth 50
	python3 bench/gen_encoder.py $(B)/bench-models/encoder_base
	python3 bench/precision_peers.py --threads 1,2 $(B)/bench-models/resnet50 $(B)/bench-models/encoder_base
	python3 bench/dynamic_peers.py --threads 1 --dir $(B)/bench-models
	python3 bench/train_peers.py --threads 1,2 --primc $(B)/primc
	python3 bench/train_ab.py --threads 1 --primc $(B)/primc
	python3 bench/train_ab.py --threads 2 --primc $(B)/primc
	python3 bench/torch_backend.py --threads 1,2

-include bench/bench.mk

# the large zoo (after `make models`) compiled and checked against ONNX Runtime
test-large: all
	PRIMC_LARGE=1 bash tests/suites/models.sh
	PRIMC_LARGE=1 bash tests/suites/dynamic.sh
