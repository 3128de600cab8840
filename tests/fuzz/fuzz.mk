# tests/fuzz/fuzz.mk: `make fuzz` builds the libFuzzer harness of the ONNX importer and runs it for FUZZ_SECONDS.
# Seeds: the ONNX node test models ($(ONNX_NODE_DIR) or build/onnx-node-tests) and tests/data/onnx_*.
# Crashers land in $(FUZZ_B)/crash-*; keep them as regression inputs under tests/data/onnx_bad/.
FUZZ_SECONDS ?= 60
FUZZ_B       ?= build-fuzz
FUZZ_CC      ?= clang
FUZZ_FLAGS   := -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1
FUZZ_SRC     := $(wildcard ir/*.c frontend/*.c) tests/fuzz/fuzz_onnx.c
FUZZ_NODE_DIR ?= $(or $(ONNX_NODE_DIR),build/onnx-node-tests)

$(FUZZ_B)/gen/onnx.pb-c.c: $(ONNX_PROTO)
	@mkdir -p $(FUZZ_B)/gen
	protoc-c --c_out=$(FUZZ_B)/gen -I$(dir $(ONNX_PROTO)) $(ONNX_PROTO)

$(FUZZ_B)/fuzz_onnx: $(FUZZ_SRC) $(FUZZ_B)/gen/onnx.pb-c.c $(wildcard ir/*.h ir/*.def frontend/*.h frontend/*.def)
	$(FUZZ_CC) -std=c11 -D_GNU_SOURCE $(FUZZ_FLAGS) -I. -I$(FUZZ_B)/gen -o $@ $(FUZZ_SRC) $(FUZZ_B)/gen/onnx.pb-c.c \
	  -lprotobuf-c -lopenblas -lm -lpthread -ldl

fuzz: $(FUZZ_B)/fuzz_onnx
	@mkdir -p $(FUZZ_B)/corpus $(FUZZ_B)/seeds
	@for f in $(FUZZ_NODE_DIR)/*/model.onnx; do [ -f "$$f" ] && cp "$$f" "$(FUZZ_B)/seeds/$$(basename $$(dirname $$f)).onnx"; done; true
	@cp tests/data/onnx_bad/* tests/data/onnx_good/*.onnx $(FUZZ_B)/seeds/ 2>/dev/null; true
	cd $(FUZZ_B) && ./fuzz_onnx -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -rss_limit_mb=2048 \
	  -timeout=10 corpus seeds
