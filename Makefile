# The two set-up commands of the README: `make run` and `make test`.
BUILD ?= build
JOBS ?= $(shell nproc)
PORT ?= 8000
CMAKE_FLAGS ?=

.PHONY: all build run test test-fast test-asan test-tsan fuzz bench bench-serve bootstrap clean

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

# Sanitizer runs, each in its own build folder (every object instrumented; clang, as CI's job):
# test-asan: AddressSanitizer + UndefinedBehaviorSanitizer over the `fast` tests (only their binaries are built;
# the folder is also the libFuzzer build of `make fuzz`: one instrumented compile serves both);
# test-tsan: ThreadSanitizer over the thread pool's, the engine's and the server's tests (the
# compute pool, the engine thread, the HTTP threads, the model registry's concurrent loads). A report fails the test that made it.
SAN_CMAKE = CC=clang CXX=clang++ cmake -S . -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTACHYON_BENCH=OFF \
	-DTACHYON_CUDA=OFF $(CMAKE_FLAGS)
TSAN_TESTS = base_tests engine_tests engine_model_tests engine_fault_tests server_tests server_model_registry_tests
test-asan: bootstrap
	$(SAN_CMAKE) -B build-asan -DTACHYON_SANITIZE=address,undefined -DTACHYON_LIBFUZZER=ON
	cmake --build build-asan -j $(JOBS) --target tachyon_tests_fast
	cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		ctest --output-on-failure -j $(JOBS) --timeout 1800 -L fast

test-tsan: bootstrap
	$(SAN_CMAKE) -B build-tsan -DTACHYON_SANITIZE=thread
	cmake --build build-tsan -j $(JOBS) --target $(TSAN_TESTS)
	set -e; for t in $(TSAN_TESTS); do \
		TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 $$(find build-tsan/tests -name $$t -type f -perm -u+x); done

# libFuzzer + ASan + UBSan over every parser (tests/fuzz/run_fuzzers.sh); FUZZ_SECONDS per target.
FUZZ_SECONDS ?= 300
fuzz:
	tests/fuzz/run_fuzzers.sh --seconds $(FUZZ_SECONDS)

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
