# Entry points for people: `make demo` runs the main job, `make test` the whole test suite.
# Both install missing Debian packages first (scripts/install-deps.sh) and build.
BUILD ?= build
BUILD_ASAN ?= build-asan
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps build build-asan test test-fast demo demo-minimal bench clean

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# The same tests again under AddressSanitizer + UndefinedBehaviorSanitizer (CUDA off: the
# sanitizer runtime cannot see inside the CUDA driver, and no GPU runs here anyway).
build-asan: deps
	cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=Debug -DZT_SANITIZE=ON -DZT_CUDA=OFF -DZT_NCCL=OFF $(CMAKE_FLAGS)
	cmake --build $(BUILD_ASAN) -j $(JOBS)

test-fast: build
	ctest --test-dir $(BUILD) --output-on-failure -j 2

test: build build-asan
	ctest --test-dir $(BUILD) --output-on-failure -j 2
	ASAN_OPTIONS=detect_leaks=1 ctest --test-dir $(BUILD_ASAN) --output-on-failure -j 2

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
	rm -rf $(BUILD) $(BUILD_ASAN)
