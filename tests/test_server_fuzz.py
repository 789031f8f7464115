"""serving/server.py fuzzed from its own OpenAPI schema (schemathesis): a bounded run of requests the schema allows
and requests it refuses, against a real server; none answered 5xx, every answer as the schema documents it."""

from collections import Counter

from helpers import serving


def test_the_api_answers_every_generated_request_as_its_schema_says_and_never_5xx(smoke_run):
    import schemathesis
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    with serving(smoke_run) as (port, _, _):
        operation = schemathesis.openapi.from_url(f"http://127.0.0.1:{port}/openapi.json")["/translate"]["POST"]
        statuses = Counter()
        modes = schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE

        @settings(max_examples=150, deadline=None, database=None, derandomize=True,
                  suppress_health_check=list(HealthCheck))
        @given(case=st.one_of(*(operation.as_strategy(generation_mode=mode) for mode in modes)))
        def request(case):
            response = case.call(base_url=f"http://127.0.0.1:{port}", timeout=60)
            statuses[response.status_code] += 1
            # Its status documented, its body as the schema says, a refused request refused, never a 5xx. A request
            # the schema allows may still be refused for its size (413), as the schema documents.
            case.validate_response(response, excluded_checks=[schemathesis.checks.positive_data_acceptance])

        request()
    assert sum(statuses.values()) == 150 and statuses[200] > 40 and not any(code >= 500 for code in statuses)
