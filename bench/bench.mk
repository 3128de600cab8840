# bench/bench.mk: `make bench-gemm`: primc_sgemm, primc_dgemm and primc_conv2d_f32 against OpenBLAS on 1 and 2 threads (included by the Makefile).
.PHONY: bench-gemm

$(B)/gemm_bench: $(B)/bench/gemm_bench.o $(B)/libprimc_rt.a
	$(CC) $(SAN) -o $@ $(B)/bench/gemm_bench.o $(B)/libprimc_rt.a -lopenblas -lm -ldl -lpthread

# OpenBLAS as it detects this CPU, then forced to its Haswell (AVX2) kernels for comparison
bench-gemm: $(B)/gemm_bench
	PRIMC_NUM_THREADS=1 $(B)/gemm_bench
	PRIMC_NUM_THREADS=2 $(B)/gemm_bench
	OPENBLAS_CORETYPE=Haswell PRIMC_NUM_THREADS=1 $(B)/gemm_bench --quick
	OPENBLAS_CORETYPE=Haswell PRIMC_NUM_THREADS=2 $(B)/gemm_bench --quick

$(B)/conv_ab: $(B)/bench/conv_ab.o $(B)/libprimc_rt.a
	$(CC) $(SAN) -o $@ $(B)/bench/conv_ab.o $(B)/libprimc_rt.a -lm -ldl -lpthread

$(B)/wgrad_ab: $(B)/bench/wgrad_ab.o $(B)/libprimc_rt.a
	$(CC) $(SAN) -o $@ $(B)/bench/wgrad_ab.o $(B)/libprimc_rt.a -lm -ldl -lpthread

$(B)/corelat: bench/corelat.c
	@mkdir -p $(B)
	$(CC) -std=c11 -O2 -D_GNU_SOURCE -Wall -Wextra -Werror -o $@ $< -lpthread

$(B)/stream: bench/stream.c
	@mkdir -p $(B)
	$(CC) -std=c11 -O2 -D_GNU_SOURCE -o $@ $< -lpthread

$(B)/coreshare: bench/coreshare.c
	@mkdir -p $(B)
	$(CC) -std=c11 -O2 -D_GNU_SOURCE -Wall -Wextra -Werror -o $@ $<
