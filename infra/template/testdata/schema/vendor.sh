#!/bin/sh
# vendor.sh regenerates the JSON schemas in this folder from the installed
# aws-sam-translator and cfn-lint Python packages (pip install cfn-lint),
# so that the Go test validates template.yaml on machines without them.
# Run from this folder: sh vendor.sh
set -eu
python3 - <<'PY'
import json, os
import cfnlint
from samtranslator.internal.schema_source.schema import SamModel, get_schema

def strip(o):
    # Documentation keywords only: they take most of the size and validate nothing.
    if isinstance(o, dict):
        return {k: strip(v) for k, v in o.items() if k not in ("markdownDescription", "description", "markdownDescriptionOverride")}
    if isinstance(o, list):
        return [strip(v) for v in o]
    return o

def go_patterns(o):
    # ECMA-262 escapes \uXXXX in patterns (AWS::IAM::Role's) are \x{XXXX}
    # in Go's regexp syntax, and Python's end of text \Z (AWS::Logs::LogGroup's)
    # is Go's \z.
    import re
    def go(p):
        return re.sub(r"\\u([0-9A-Fa-f]{4})", r"\\x{\1}", p).replace("\\Z", "\\z")
    if isinstance(o, dict):
        return {k: (go(v) if k == "pattern" and isinstance(v, str) else go_patterns(v)) for k, v in o.items()}
    if isinstance(o, list):
        return [go_patterns(v) for v in o]
    return o

def write(name, obj):
    with open(name, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.write("\n")

# The SAM schema, as the SAM project generates it (samtranslator's
# schema_source). Go's regexp has no lookahead: its one
# "^(?!AWS::Serverless::).+$" becomes the equivalent "not" of a pattern.
sam = strip(get_schema(SamModel))
res = sam["definitions"]["samtranslator__internal__schema_source__any_cfn_resource__Resource"]["properties"]["Type"]
assert res.pop("pattern") == "^(?!AWS::Serverless::).+$"
res["not"] = {"pattern": "^AWS::Serverless::"}
write("sam.schema.json", sam)

# cfn-lint's schemas: template sections, and the CloudFormation resource
# provider schemas (us-east-1) of the non-SAM resource types template.yaml
# uses.
base = os.path.join(os.path.dirname(cfnlint.__file__), "data", "schemas")
for section in ("parameters", "outputs", "resources"):
    with open(os.path.join(base, "other", section, "configuration.json")) as f:
        write("cfn-%s.json" % section, json.load(f))
from cfnlint.data.schemas.providers import us_east_1
for typ in ("AWS::DynamoDB::Table", "AWS::CloudFront::Distribution", "AWS::SQS::Queue", "AWS::CloudWatch::Alarm", "AWS::Scheduler::ScheduleGroup", "AWS::IAM::Role", "AWS::S3::Bucket", "AWS::S3::BucketPolicy", "AWS::CloudFront::Function", "AWS::SecretsManager::Secret", "AWS::KMS::Key", "AWS::S3Vectors::VectorBucket", "AWS::S3Vectors::Index", "AWS::Logs::LogGroup"):
    with open(os.path.join(base, "resources", us_east_1.types[typ] + ".json")) as f:
        schema = strip(json.load(f))
        # The meta-schema some name is on the network; it validates the
        # schema, not the template.
        schema.pop("$schema", None)
        if typ == "AWS::S3Vectors::Index":
            # cfn-lint's patch gives VectorBucketArn an ARN pattern, which
            # the !GetAtt of the template's bucket (known only at
            # deployment) cannot be checked against here.
            schema["definitions"]["VectorBucketArn"].pop("pattern")
        write(typ.replace("::", "-") + ".json", go_patterns(schema))
PY
