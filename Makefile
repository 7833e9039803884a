# The newcomer's commands. `make run` and `make test` each install what is missing, build, and go.
BUILD     ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS      ?= $(shell nproc)
KD_CUDA   ?= AUTO
RUN_DIR   ?= $(CURDIR)/run
METRICS   ?= 127.0.0.1:9464
BACKEND   ?= auto

.PHONY: all deps configure build run test bench clean

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

test: build
	cd $(BUILD) && ctest --output-on-failure -j 2 --label-exclude gpu

bench: build
	@echo "see bench/README.md for how each benchmark is run"

clean:
	rm -rf $(BUILD)
