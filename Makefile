# The two set-up commands of the README: `make run` and `make test`.
BUILD ?= build
JOBS ?= $(shell nproc)
PORT ?= 8000
CMAKE_FLAGS ?=

.PHONY: all build run test bench bootstrap clean

all: build

bootstrap:
	@./scripts/bootstrap.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS)

build: bootstrap $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

run: build
	./$(BUILD)/tachyon serve --port $(PORT)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 900

bench: build
	./bench/run_cpu_bench.sh
	./bench/run_moe_bench.sh

clean:
	rm -rf $(BUILD)
