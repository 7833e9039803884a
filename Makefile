# The newcomer's commands. `make run`, `make check` and `make test` each install what is missing,
# build, and go.
#   make check   the test suite of the regular build (what a developer runs while working)
#   make test    everything CI runs (.ci/run): check, the Debian packages (package-test), the
#                whole suite again under ASan and UBSan (sanitize), and each fuzz target for
#                FUZZ_SECONDS (fuzz)
#   make stress  the suites of check and sanitize STRESS_RUNS times each beside two CPU hogs,
#                listing every test that failed even once (scripts/stress-tests.sh)
BUILD     ?= build
SAN_BUILD ?= build-asan
BUILD_TYPE ?= RelWithDebInfo
JOBS      ?= $(shell nproc)
KD_CUDA   ?= AUTO
RUN_DIR   ?= $(CURDIR)/run
METRICS   ?= 127.0.0.1:9464
BACKEND   ?= auto
FUZZ_SECONDS ?= 25
STRESS_RUNS ?= 5
# The sanitizer and fuzz build: Debian's clang (libFuzzer and the sanitizer runtimes).
SAN_CC    ?= clang-14
SAN_CXX   ?= clang++-14

.PHONY: all deps configure build run check test package sanitize-build sanitize fuzz stress bench \
        clean

all: build

deps:
	@scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DKD_CUDA=$(KD_CUDA) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# Starts kerneld in the foreground: data plane on run/kerneld.sock, admin on run/admin.sock,
# Prometheus metrics on http://127.0.0.1:9464/metrics. Ctrl-C stops it.
run: build
	@mkdir -p $(RUN_DIR)
	$(BUILD)/server/kerneld --socket=$(RUN_DIR)/kerneld.sock --admin_socket=$(RUN_DIR)/admin.sock \
	  --metrics_address=$(METRICS) --backend=$(BACKEND)

CHECK_EXCLUDE = gpu
check: build
	cd $(BUILD) && ctest --output-on-failure -j 2 --label-exclude "$(CHECK_EXCLUDE)"

# build/kerneld_<version>_amd64.deb and kerneld-dev, checked (scripts/package-test.sh: as root
# in CI it installs them with dpkg -i, starts the installed daemon and purges them again).
package: build
	@scripts/package-test.sh $(BUILD)

# One clang build with ASan + UBSan and libFuzzer's coverage: the CPU configuration (no CUDA,
# no HIP), no benchmarks.
sanitize-build: deps
	@CC=$(SAN_CC) CXX=$(SAN_CXX) cmake -S . -B $(SAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DKD_CUDA=OFF -DKD_HIP=OFF -DKD_BUILD_BENCH=OFF -DKD_SANITIZE=ON -DKD_FUZZ=ON >/dev/null
	@cmake --build $(SAN_BUILD) -j $(JOBS)

# The whole test suite under ASan and UBSan: any report fails its test. Not the Python package's
# test (python3 is not built with ASan, so it cannot load the sanitized libkerneld_c.so).
# handle_sigbus=0: shm_guard_test checks that a truncated mapping still kills a process with
# SIGBUS, which ASan would turn into a report and an abort.
SAN_ENV = ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:handle_sigbus=0 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
SAN_EXCLUDE = gpu|python
sanitize: sanitize-build
	cd $(SAN_BUILD) && env $(SAN_ENV) ctest --output-on-failure -j 2 --label-exclude "$(SAN_EXCLUDE)"

fuzz: sanitize-build
	@FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz.sh $(SAN_BUILD)

test: check package sanitize fuzz

# No test may depend on an idle machine: both suites, as check and sanitize run them, with two
# busy loops beside them. Logs in a new /tmp/kd-stress.* directory, named in the report.
stress: build sanitize-build
	@scripts/stress-tests.sh --runs $(STRESS_RUNS) --build $(BUILD) --exclude "$(CHECK_EXCLUDE)" \
	  --sanitize-build $(SAN_BUILD) --sanitize-exclude "$(SAN_EXCLUDE)" --sanitize-env "$(SAN_ENV)"

bench: build
	@echo "see bench/README.md for how each benchmark is run"

clean:
	rm -rf $(BUILD) $(SAN_BUILD)
