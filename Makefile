# Thin wrapper over CMake: `make run` starts ember on :4040 with data in ./data;
# `make test` builds everything and runs every test (also under ASan+UBSan);
# `make test-stress` runs the load-sensitive tests three times with every
# core held busy (docs/testing.md).
BUILD ?= build
JOBS ?= $(shell nproc)
EMBER_FLAGS ?=

FUZZ_SECONDS ?= 300

.PHONY: deps build run test test-stress bench clean fuzz

deps:
	./scripts/install-deps.sh

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

run: build
	$(BUILD)/services/ember/ember --http.address=0.0.0.0:4040 --data.dir=./data $(EMBER_FLAGS)

test: deps
	./scripts/test.sh

test-stress: deps
	./scripts/test-stress.sh

# Fuzzes every target for FUZZ_SECONDS each (clang, instrumented libraries)
# and folds the finds, minimized, into tests/fuzz/corpus: commit them.
fuzz: deps
	./scripts/fuzz.sh --seconds $(FUZZ_SECONDS) --merge

bench: build
	./bench/run.sh $(BUILD)

clean:
	rm -rf $(BUILD) build-asan build-fuzz
