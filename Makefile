# Entry points for people: `make demo` runs the main job, `make test` the whole test suite.
# Both install missing Debian packages first (scripts/install-deps.sh) and build.
# Every build here is configured with ZT_WERROR=ON (warnings are errors, so CI fails on a
# warning); a plain `cmake -S . -B build` leaves it off.
BUILD ?= build
BUILD_ASAN ?= build-asan
BUILD_TSAN ?= build-tsan
CUDA_HOME ?= /usr/local/cuda
# Where the CUDA toolkit's headers are, the sanitizer builds run the CUDA code (the backend,
# its kernels, NCCL, the GPT-2 CUDA ops) on cudasim, the CPU stand-in for the CUDA runtime,
# cuBLAS and NCCL (docs/cudasim.md); no GPU needed.
CUDA_FAKE ?= $(if $(wildcard $(CUDA_HOME)/include/cuda_runtime_api.h),ON,OFF)
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps build build-asan build-tsan test test-fast test-tsan cuda-coverage demo demo-minimal bench clean abi-check abi-update

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZT_WERROR=ON $(CMAKE_FLAGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# The same tests again under AddressSanitizer + UndefinedBehaviorSanitizer, with the CUDA code
# on the stand-in (the sanitizers cannot see inside a real CUDA driver).
build-asan: deps
	cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=Debug -DZT_WERROR=ON -DZT_SANITIZE=ON \
	  -DZT_CUDA=$(CUDA_FAKE) -DZT_CUDA_FAKE=$(CUDA_FAKE) -DZT_NCCL=$(CUDA_FAKE) \
	  -DCUDAToolkit_ROOT=$(CUDA_HOME) $(CMAKE_FLAGS)
	cmake --build $(BUILD_ASAN) -j $(JOBS)

# The CUDA tests on the stand-in under ThreadSanitizer: a kernel's CUDA threads are threads to
# it, so it reports races between them (what compute-sanitizer's racecheck does on a GPU).
build-tsan: deps
	cmake -S . -B $(BUILD_TSAN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZT_WERROR=ON -DZT_TSAN=ON \
	  -DZT_CUDA_FAKE=ON -DZT_NCCL=ON -DCUDAToolkit_ROOT=$(CUDA_HOME) $(CMAKE_FLAGS)
	cmake --build $(BUILD_TSAN) -j $(JOBS)

test-tsan: build-tsan
	TSAN_OPTIONS="suppressions=$(CURDIR)/tests/tsan.supp" ctest --test-dir $(BUILD_TSAN) -L cuda --output-on-failure -j 2

# The CUDA code's lines the CUDA tests execute on the stand-in (gcov).
cuda-coverage: deps
	scripts/cuda-coverage.sh

test-fast: build
	ctest --test-dir $(BUILD) --output-on-failure -j 2

# The public ABI against the committed baseline (docs/abi.md): `make test` runs it as the
# ctest abi_check of $(BUILD); abi-update writes the baseline when the version allows it.
abi-check: build
	scripts/abi-check.sh $(BUILD)

abi-update: build
	scripts/abi-check.sh --update $(BUILD)

test: build build-asan
	scripts/test-venv.sh $(BUILD)/venv
	ctest --test-dir $(BUILD) --output-on-failure -j 2
	ASAN_OPTIONS=detect_leaks=1 ctest --test-dir $(BUILD_ASAN) --output-on-failure -j 2
ifeq ($(CUDA_FAKE),ON)
	$(MAKE) test-tsan
else
	@echo "test: no CUDA toolkit headers in $(CUDA_HOME): the CUDA code was not run (install the toolkit, or set CUDA_HOME)"
endif

# GPT-2 124M (d12) for 20 steps on the byte-level GPL-3 text (shipped with every Debian
# system). --demo sizes the run for the device: on the CPU batch 4 x 64, parameters and
# optimizer state on NVMe in ./ztier-swap and a 512 MB device budget (the model state is 2 GB);
# on a GPU batch 16 x 1024, both in pinned host memory and a 1 GB device budget.
# DEMO_DEVICE: auto (the GPU where one is usable), cpu or cuda.
DEMO_TEXT ?= /usr/share/common-licenses/GPL-3
DEMO_DEVICE ?= auto
demo: build
	mkdir -p ztier-swap
	$(BUILD)/examples/gpt2/zt_gpt2 --config d12 --text $(DEMO_TEXT) --steps 20 --lr 3e-4 \
	  --demo ztier-swap --device $(DEMO_DEVICE)

demo-minimal: build
	mkdir -p ztier-swap
	$(BUILD)/examples/minimal/zt_minimal --nvme ztier-swap --steps 30

bench: build
	$(BUILD)/tools/ztier bench copy
	$(BUILD)/tools/ztier bench adam
	$(BUILD)/tools/ztier bench nvme --path .

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) $(BUILD_TSAN) build-cov
