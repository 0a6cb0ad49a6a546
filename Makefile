# Thin wrapper over CMake. `make` builds build/orch; `make demo` and `make test` are the quick start.
BUILD ?= build
BUILD_ASAN ?= build-asan
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

PREFIX ?= /usr/local

.PHONY: all install setup demo test test-fast test-asan test-nvrtc test-node-compiled fuzz fuzz-long format format-check clean

all: $(BUILD)/.configured
	cmake --build $(BUILD) -j $(JOBS)

$(BUILD)/.configured: CMakeLists.txt tests/tests.cmake
	scripts/setup.sh --no-python
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)
	touch $@

# The CLI, include/orch.h, liborch and liborch-runtime (shared and static) and their pkg-config
# files under PREFIX (docs/embedding.md).
install: all
	cmake --install $(BUILD) --prefix $(PREFIX)

setup:
	scripts/setup.sh

demo: all
	scripts/demo.sh $(BUILD)/orch

# Every test: the release build, then the whole suite again under ASan+UBSan, then a bounded fuzz.
test:
	scripts/setup.sh
	scripts/run_tests.sh

test-fast: setup all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The CUDA emitters' NVRTC sweeps, every kernel for every described arch (sm_80 and sm_90a;
# make test: a sample for sm_90a). Run after make test (which writes build/models).
test-nvrtc: all
	unset ORCH_CUGEN_SAMPLE ORCH_CUGEN_SM90_ONLY; \
	for t in cugen_linear_compile mlp_fused attention_cuda cugen_compile; do \
		out=$$($(BUILD)/tests/unit_$$t); rc=$$?; echo "unit_$$t: $$(echo "$$out" | tail -n 1)"; \
		[ $$rc -eq 0 ] || { echo "$$out" | grep -E '^FAIL|check failed'; exit 1; }; done
	env -u ORCH_CUGEN_SAMPLE -u ORCH_CUGEN_SM90_ONLY $(BUILD)/tests/unit_cugen_models build/models | tail -n 1  # models from make test

# Every ONNX node test compiled for the CPU target (make test compiles every other one), one
# shard per core. Run after make test (which writes build/node_data).
test-node-compiled: all
	pids=; for k in $$(seq 0 $$(($(JOBS) - 1))); do \
		$(BUILD)/node_tests build/node_data --engine compiled --shard $$k/$(JOBS) \
			--xfail tests/ops/node_expected_failures.txt > $(BUILD)/node-compiled-$$k.log 2>&1 & \
		pids="$$pids $$!"; \
	done; rc=0; for j in $$pids; do wait $$j || rc=1; done; \
	cat $(BUILD)/node-compiled-*.log | grep -E '^(FAIL|XPASS)|passed'; exit $$rc

fuzz-long:
	scripts/fuzz.sh 3600

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

format-check:
	clang-format --dry-run --Werror $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) build-fuzz
