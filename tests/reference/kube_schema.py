"""Check custom resources against their CustomResourceDefinition's schema,
as an API server would on create (jsonschema; `x-kubernetes-*` keys are
not checked, CEL rules neither).

Usage: kube_schema.py CRD.yaml CR.yaml
Prints "OK NAME" or "ERROR NAME path: message" per resource; exits 1 if any
resource is refused.
"""

import sys

import jsonschema
import yaml

crd = next(d for d in yaml.safe_load_all(open(sys.argv[1])) if d)
schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
rc = 0
for doc in yaml.safe_load_all(open(sys.argv[2])):
    if not doc:
        continue
    name = doc["metadata"]["name"]
    errs = sorted(jsonschema.Draft7Validator(schema).iter_errors(doc), key=str)
    for e in errs:
        print("ERROR", name, "/".join(map(str, e.path)) + ":", e.message)
        rc = 1
    if not errs:
        print("OK", name)
sys.exit(rc)
