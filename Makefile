# Workflow Chat Service. `make run` needs Go; `make test` also a C compiler (-race)
# and Node 20 with npm (the MCP TypeScript SDK test; README.md, "What you need").
GO        ?= go
FUNCTIONS := $(patsubst functions/%/main.go,%,$(wildcard functions/*/main.go))
BUILD_DIR ?= .build
LAMBDA_FLAGS := -trimpath -ldflags='-s -w' -tags lambda.norpc

.PHONY: run test test-short vet lint-template lambda-test dynamodb-local build deploy bench cost load soak clean fuzz fuzz-short fuzz-run

# DATA_FILE keeps `make run`'s data across restarts (git-ignored);
# `make run DATA_FILE=` keeps it in memory only.
DATA_FILE ?= .data/devserver.json

# `make run` lifts the per-address sign-up and sign-in limits: every local
# client has the one address 127.0.0.1, and a frontend's end-to-end suite
# signs up more users than ten a minute (the counters live in $(DATA_FILE),
# so a restart does not reset them). The per-email sign-in limit stays.
# Set them to limit again, e.g. `make run RATE_LIMIT_SIGN_UP_ADDRESS=10/m,100/h`;
# a plain `go run ./infra/devserver` and Lambda keep the defaults.
RATE_LIMIT_SIGN_UP_ADDRESS ?= 0
RATE_LIMIT_SIGN_IN_ADDRESS ?= 0

# `make run` holds each function's DynamoDB calls to its IAM policy in
# template.yaml, as AWS does (a call the template does not grant fails
# with AccessDeniedException, logged); `make run LOCAL_IAM_TEMPLATE=`
# turns the check off.
LOCAL_IAM_TEMPLATE ?= $(CURDIR)/template.yaml

## run: start the whole service locally (REST API :3000, tool server :3001) on the embedded store, kept in $(DATA_FILE); per-address sign-up and sign-in limits off.
run:
	RATE_LIMIT_SIGN_UP_ADDRESS='$(RATE_LIMIT_SIGN_UP_ADDRESS)' RATE_LIMIT_SIGN_IN_ADDRESS='$(RATE_LIMIT_SIGN_IN_ADDRESS)' DATA_FILE='$(DATA_FILE)' LOCAL_IAM_TEMPLATE='$(LOCAL_IAM_TEMPLATE)' $(GO) run ./infra/devserver

## test: vet, then every test (unit, storage integration, Lambda events, template, end-to-end), then a short fuzz run and cfn-lint when installed.
# -timeout bounds a package's run for a hung test only: on a loaded machine
# (both cores busy elsewhere, -race) infra/e2e alone takes 10-20 minutes.
test: vet
	$(GO) test -count=1 -race -timeout 60m ./...
	@$(MAKE) --no-print-directory fuzz-short
	@$(MAKE) --no-print-directory lint-template

## dynamodb-local: serve the embedded DynamoDB engine alone on $(DYNAMODB_ADDR) with the service's tables (e.g. for DYNAMODB_ENDPOINT or the AWS CLI's --endpoint-url).
DYNAMODB_ADDR ?= 127.0.0.1:8000
dynamodb-local:
	ADDR='$(DYNAMODB_ADDR)' $(GO) run ./infra/dynamodb

## lambda-test: drive the functions' bootstraps (built for this machine with the production flags) under the AWS Lambda Runtime Interface Emulator, pinned in go.mod as a tool; also part of `make test`.
lambda-test:
	$(GO) test -count=1 -timeout 60m -v -run . ./infra/lambdart/

## lint-template: cfn-lint template.yaml (AWS's CloudFormation and SAM linter), when cfn-lint is on PATH; infra/template's Go tests check the template everywhere.
lint-template:
	@if command -v cfn-lint >/dev/null 2>&1; then echo "cfn-lint template.yaml"; cfn-lint template.yaml; else echo "cfn-lint not installed: skipped (pip install cfn-lint)"; fi

# Fuzz targets as package:FuzzName. `go test -fuzz` fuzzes one target per
# invocation, so they run one after another; seed corpora are committed
# under each package's testdata/fuzz/<FuzzName>/ and run as ordinary tests.
FUZZ_TARGETS := \
	./infra/dynamolocal:FuzzWireFast \
	./shared/httpapi:FuzzDecode \
	./shared/httpapi:FuzzUnmarshalStrict \
	./shared/workflow:FuzzResolve \
	./shared/workflow:FuzzRefs \
	./shared/workflow/proposal:FuzzApplyChanges \
	./shared/toolserver:FuzzDispatch \
	./shared/sse:FuzzEncode \
	./shared/sse:FuzzEncodeStream \
	./shared/schema:FuzzWalkAgrees \
	./shared/schedule:FuzzParse \
	./shared/webhook:FuzzVerify
FUZZTIME         ?= 60s
FUZZTIME_SHORT   ?= 10000x
# Minimizing each new interesting input may take go test's default 60s,
# during which nothing else is fuzzed; keep it short.
FUZZMINIMIZETIME ?= 5s

## fuzz: fuzz every target for FUZZTIME each (default 60s), one after another.
fuzz:
	@$(MAKE) --no-print-directory fuzz-run FUZZ_FOR=$(FUZZTIME)

## fuzz-short: fuzz every target for FUZZTIME_SHORT each (default 10000 inputs, a few seconds); part of `make test`.
# A count rather than a duration: with a duration, go test can report the
# deadline itself as a failure ("context deadline exceeded") when it passes
# while a worker is busy with a new input, which a loaded machine makes
# likely; a count has no deadline.
fuzz-short:
	@$(MAKE) --no-print-directory fuzz-run FUZZ_FOR=$(FUZZTIME_SHORT)

fuzz-run:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$name ($$pkg) for $(FUZZ_FOR)"; \
		$(GO) test -run="^$$name\$$" -fuzz="^$$name\$$" -fuzztime=$(FUZZ_FOR) -fuzzminimizetime=$(FUZZMINIMIZETIME) $$pkg; \
	done

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet ./...
	@$(GO) mod tidy -diff >/dev/null || { echo "go.mod/go.sum not tidy: run go mod tidy"; $(GO) mod tidy -diff; exit 1; }

## build: cross-compile every Lambda function to $(BUILD_DIR)/<name>/bootstrap (linux/arm64).
build: $(addprefix $(BUILD_DIR)/,$(addsuffix /bootstrap,$(FUNCTIONS)))

$(BUILD_DIR)/%/bootstrap: FORCE
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build $(LAMBDA_FLAGS) -o $@ ./functions/$*

# SAM's makefile builder calls build-<LogicalId> with ARTIFACTS_DIR set.
build-%Function:
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/$(shell echo $* | tr 'A-Z' 'a-z')

## deploy: build with SAM and deploy with the samconfig.toml defaults; CONFIRM=0 skips the change set prompt (CI).
CONFIRM ?= 1
deploy:
	sam build && sam deploy $(if $(filter 0,$(CONFIRM)),--no-confirm-changeset,)

## bench: rewrite the generated sections of docs/benchmarks.md (those between its bench:begin/bench:end markers; the rest of the file is kept): Go benchmarks, cold start and first invoke per function, a 15 s load test (~10 min on 2 cores; BENCH_FLAGS="-only 'Cold start'" for some sections, -list names them).
bench:
	$(GO) run ./infra/bench -out docs/benchmarks.md $(BENCH_FLAGS)

## cost: what a short and a long reply, a workflow step and an idle month cost in AWS, from usage measured offline (DynamoDB capacity per call, each function's duration and peak memory under the emulator, requests and bytes) at dated us-east-1 prices; prints it and rewrites docs/cost.md (~5 min on 2 cores).
cost:
	$(GO) run ./infra/cost -out docs/cost.md

## load: the load generator on a dev server of its own (LOAD_FLAGS="-c 16 -d 1m -json load.json").
load:
	$(GO) run ./infra/load -spawn -c 8 -d 30s $(LOAD_FLAGS)

## soak: 2 minutes at low concurrency, failing if the dev server's RSS keeps growing (LOAD_FLAGS="-d 10m").
soak:
	$(GO) run ./infra/load -spawn -soak $(LOAD_FLAGS)

clean:
	rm -rf $(BUILD_DIR)

FORCE:
