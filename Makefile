# `make test` runs everything CI runs. `make run` publishes a sample batch
# output to a local store (file://, no S3 needed).
.PHONY: test run build

test:
	bash scripts/test.sh

build:
	go build -o publish ./cmd/publish

run: build
	bash scripts/demo.sh
