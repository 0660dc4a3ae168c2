"""The API under generated input (schemathesis, from the service's own OpenAPI schema): whatever a caller sends
to any op, the answer is never a 5xx and every refusal is the error envelope naming a code."""

import os

import schemathesis
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, given, settings

from retrieval.errors import STATUS

# Per op and backend: the run in `make test` stays under a minute; bench/fuzz.sh asks for many more.
EXAMPLES = int(os.environ.get("LOOM_FUZZ_EXAMPLES", "12"))


def test_no_input_gets_a_5xx_or_an_answer_outside_the_envelope(backend, alice):
    # Django's own WSGI app: loom_site.wsgi would also start the server's workers in the test process.
    schema = schemathesis.openapi.from_wsgi("/v1/schema?format=json", get_wsgi_application())
    headers = {"Authorization": f"Bearer {alice.token('admin')}"}
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) > 20

    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        def answered(case):
            response = case.call(headers=headers)
            assert response.status_code < 500, (case.operation.label, case.body, response.text[:500])
            if response.status_code >= 400:
                error = response.json()["error"]
                assert error["code"] in STATUS and error["message"], (case.operation.label, case.body, error)

        answered()
