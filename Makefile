# Workflow Chat Service. `make run` and `make test` need nothing but Go.
GO        ?= go
FUNCTIONS := $(notdir $(wildcard functions/*))
BUILD_DIR ?= .build
LAMBDA_FLAGS := -trimpath -ldflags='-s -w' -tags lambda.norpc

.PHONY: run test test-short vet build deploy bench clean

## run: start the whole service locally (REST API :3000, tool server :3001) on the embedded store.
run:
	$(GO) run ./infra/devserver

## test: vet, then every test (unit, storage integration, Lambda events, template, end-to-end).
test: vet
	$(GO) test -count=1 -race -timeout 20m ./...

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet ./...

## build: cross-compile every Lambda function to $(BUILD_DIR)/<name>/bootstrap (linux/arm64).
build: $(addprefix $(BUILD_DIR)/,$(addsuffix /bootstrap,$(FUNCTIONS)))

$(BUILD_DIR)/%/bootstrap: FORCE
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build $(LAMBDA_FLAGS) -o $@ ./functions/$*

# SAM's makefile builder calls build-<LogicalId> with ARTIFACTS_DIR set.
build-%Function:
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/$(shell echo $* | tr 'A-Z' 'a-z')

## deploy: build with SAM and deploy with the samconfig.toml defaults.
deploy:
	sam build && sam deploy

## bench: run the Go benchmarks and write docs/benchmarks.md.
bench:
	$(GO) run ./infra/bench -out docs/benchmarks.md

clean:
	rm -rf $(BUILD_DIR)

FORCE:
