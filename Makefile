# The two commands of the README: `make run` and `make test`.
# Both create .venv on first use (Python 3.11+, Java 17+ needed for Spark).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: run test lint kafka-jars bench-quick clean

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[server,test]" -c constraints.txt
	touch $@

## run: start delayline with an embedded Redis on 127.0.0.1:6390 (ARGS="..." for options)
run: $(VENV)/.installed
	$(BIN)/delayline run $(ARGS)

## test: lint, type-check, then every test (real Redis, real local Spark, a real Kafka broker)
test: lint kafka-jars
	$(BIN)/pytest $(PYTEST_ARGS)

## kafka-jars: the Kafka broker the tests and the benchmarks start (delayline.testing.kafka),
## from Maven Central
KAFKA_POM := src/delayline/testing/kafka-pom.xml
kafka-jars: build/kafka-jars/.fetched

build/kafka-jars/.fetched: $(KAFKA_POM)
	mvn -q -B -f $(KAFKA_POM) dependency:copy-dependencies \
		-DoutputDirectory=$(CURDIR)/build/kafka-jars -DincludeScope=runtime
	touch $@

## lint: ruff over src, tests and bench; mypy (strict) over delayline and bench (pyproject.toml)
lint: $(VENV)/.installed
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy

## bench-quick: every benchmark system on tiny workloads, a smoke test (about 1 min), in .venv-bench;
## then a 2-minute soak that fails on a lost, duplicated or early message or on Redis
## growing with deliveries (about 3 min). Its topics' retention is short so that it is
## reached within the run (by default a topic keeps 100,000 entries). The journal is
## off: it expires a due minute at a time, which moved the figure by up to 100 bytes a
## message over the run's last minute (56.5 against a bound of 64 in one CI run); the
## 45-minute soak measures it. Then delayline on a Redis Cluster of 3 primaries with a
## replica each, 3 shards, tiny rates (about 70 s, most of it Spark's start).
bench-quick: .venv-bench/.installed
	.venv-bench/bin/python -m bench run --quick --out bench/results/quick
	.venv-bench/bin/python -m bench soak --quick --minutes 2 --rate 1000 \
		--delayline-option=--topic-max-len=5000 --delayline-option=--journal-retention-ms=0 \
		--out bench/results/quick/soak.json
	.venv-bench/bin/python -m bench redis-cluster --quick --out bench/results/quick/redis-cluster

# The peers pin redis-py 5.x (see the bench extra), so they get their own venv.
.venv-bench/.installed: pyproject.toml
	$(PYTHON) -m venv .venv-bench
	.venv-bench/bin/python -m pip install --quiet --upgrade pip
	.venv-bench/bin/python -m pip install --quiet -e ".[server,bench]"
	touch $@

clean:
	rm -rf $(VENV) .venv-bench delayline-data build .pytest_cache .mypy_cache .ruff_cache
