# The two set-up commands of the README: `make run` and `make test`.
BUILD ?= build
JOBS ?= $(shell nproc)
PORT ?= 8000
CMAKE_FLAGS ?=

.PHONY: all build run test test-fast bench bench-serve bootstrap clean

all: build

bootstrap:
	@./scripts/bootstrap.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS)

# Everything: the server, the tests and the benchmarks.
build: bootstrap $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# Only what serving needs: the `tachyon` binary.
run: bootstrap $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS) --target tachyon
	./$(BUILD)/tachyon serve --port $(PORT)

# Only what the tests need (tachyon_tests: every test binary and the server they drive).
# TEST_LABELS=fast runs the seconds-long subset; labels: fast, model, slow, e2e, cuda (docs in README).
TEST_LABELS ?=
test: bootstrap $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS) --target tachyon_tests
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 900 $(if $(TEST_LABELS),-L '$(TEST_LABELS)')

test-fast: TEST_LABELS = fast
test-fast: test

bench: build
	./bench/run_cpu_bench.sh
	./bench/run_moe_bench.sh

# Serving benchmark of the demo model through the OpenAI APIs (bench/serve): results, table and plots in
# bench/results/serve-*, then README's performance section regenerated. BENCH_NOTE="shared machine" records a note;
# BENCH_SERVE_ARGS passes more harness flags (e.g. --levels 1,8 --runs 5 --server-args "--no-pld").
PYTHON ?= /usr/bin/python3
BENCH_NOTE ?=
BENCH_SERVE_ARGS ?=
bench-serve: build
	$(PYTHON) bench/serve/serve_bench.py run --model models/tachyon-demo --tachyon $(BUILD)/tachyon --update-readme \
		$(if $(BENCH_NOTE),--note "$(BENCH_NOTE)") $(BENCH_SERVE_ARGS)

clean:
	rm -rf $(BUILD)
