# `make test` runs everything CI runs. `make check` is the quick loop
# (formatting, vet, golangci-lint with staticcheck, and the tests that need no
# test server).
# `make run` publishes a sample batch output to a local store (file://, no
# S3 needed).
.PHONY: test check run build

test:
	bash scripts/test.sh

check:
	bash scripts/check.sh

build:
	go build -o publish ./cmd/publish

run: build
	bash scripts/demo.sh
