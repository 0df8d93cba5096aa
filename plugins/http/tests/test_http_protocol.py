"""The generic HTTP plugin: templates and paths, auth schemes, timings against the fleet's
ground truth, Modal's 303 redirect chain and readiness, over real loopback HTTP."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from gpubench_http import HTTPProvider, compile_path, compile_template
from gpubench_http.emulator import make_app
from pydantic import ValidationError

from gpubench_sdk import ConfigError, EchoProbe, InvalidResponseError, LLMCompletion, Request
from gpubench_sdk.testing import SimulatedFleet, quick_fleet, serve

REQUEST = LLMCompletion(prompt_tokens=3, max_tokens=8).request(7)


def test_template_keeps_types_for_whole_placeholders_and_formats_inside_text() -> None:
    render = compile_template(
        {
            "inputs": "{prompt}",
            "n": "{max_tokens}",
            "id": "doc-{seq}",
            "all": "{payload}",
            "t": "{payload.temperature}",
            "lit": "{{not a var}}",
            "k": [1, True, None],
        }
    )
    body = render(REQUEST)
    assert body["inputs"] == REQUEST.payload["prompt"] and body["n"] == 8
    assert body["id"] == "doc-7" and body["all"] == dict(REQUEST.payload)
    assert body["t"] == 0.0 and body["lit"] == "{not a var}" and body["k"] == [1, True, None]


@pytest.mark.parametrize(
    ("template", "match"),
    [
        ({"a": {"b": "{sequence}"}}, "body.a.b.*placeholders naming one of seq"),
        ({"a": ["x", "{seq"]}, r"body.a\[1\].*balanced braces"),
        ({"a": "{payload.}"}, "body.a"),
    ],
)
def test_template_errors_name_the_field(template: Any, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        compile_template(template)


def test_a_payload_field_the_workload_lacks_is_named() -> None:
    render = compile_template({"x": "{payload.nope}"})
    with pytest.raises(ConfigError, match=r"body.x.*payload has \(\['max_tokens'"):
        render(REQUEST)


def test_json_paths() -> None:
    doc = {"a": {"b": [10, {"c": "d"}]}}
    assert compile_path("$", "p")(doc) is doc
    assert compile_path("$.a.b[1].c", "p")(doc) == "d"
    with pytest.raises(LookupError, match=r"\$.a.x"):
        compile_path("$.a.x", "p")(doc)
    for bad in ("a.b", "$.a..b", "$[x]", "$.a[0"):
        with pytest.raises(ConfigError, match="output_path"):
            compile_path(bad, "output_path")


def test_options_are_checked_at_config_time() -> None:
    with pytest.raises(ValidationError, match="output_path"):
        HTTPProvider(url="http://x/predict", output_path="output")
    with pytest.raises(ValidationError, match="exactly one of header or json_path"):
        HTTPProvider(url="http://x/p", timings=[{"field": "queue_ms"}])
    with pytest.raises(ValidationError, match="Modal-Key"):
        HTTPProvider(url="http://x/p", auth_scheme="modal", api_key="no-colon")
    with pytest.raises(ValidationError, match="url"):
        HTTPProvider(url="x/p")


# -- against the emulator -------------------------------------------------------------------


def _fleet(**kw: Any) -> SimulatedFleet:
    return quick_fleet(0.3, max_workers=1, **kw)


async def _invoke_all(provider: HTTPProvider, requests: list[Request]) -> list[Any]:
    async with provider:
        return [await provider.invoke(r) for r in requests]


@pytest.mark.parametrize(
    ("auth", "key"),
    [("bearer", "k-1"), ("api-key", "k-2"), ("key", "k-3"), ("modal", "mk:ms"), ("none", None)],
)
def test_each_auth_scheme_is_what_its_service_accepts(auth: str, key: str | None) -> None:
    fleet = _fleet()
    with serve(make_app(fleet, api_key=key, auth="bearer" if auth == "none" else auth)) as s:
        options: dict[str, Any] = {"url": f"{s.url}/predict", "output_path": "$.output"}
        provider = HTTPProvider(auth_scheme=auth, api_key=key, **options)
        (result,) = asyncio.run(_invoke_all(provider, [EchoProbe().request(0)]))
        assert result.output == {"echo": "x" * 16}


def test_timings_from_json_seconds_and_header_ms_match_the_truth() -> None:
    fleet = _fleet()
    timings = [
        {"field": "execution_ms", "json_path": "$.metrics.predict_time", "unit": "s"},
        {"field": "queue_ms", "header": "x-queue-ms"},
    ]
    with serve(make_app(fleet)) as served:
        provider = HTTPProvider(
            url=f"{served.url}/predict",
            output_path="$.output",
            timings=timings,
            request_id_path="$.id",
        )
        assert provider.capabilities.server_timings == {"execution_ms", "queue_ms"}
        results = asyncio.run(
            _invoke_all(provider, [EchoProbe(sleep_ms=80).request(i) for i in range(2)])
        )
    for result in results:
        truth = fleet.truth(result.request_id)
        assert abs(result.execution_ms - truth.execution_ms) < 1
        assert abs(result.queue_ms - truth.queue_ms) < 1
    assert results[0].queue_ms >= 290 > results[1].queue_ms  # the first waited for the boot


def test_modal_303_chain_is_followed_to_the_result() -> None:
    fleet = _fleet()
    with serve(make_app(fleet, redirect_after_s=0.1)) as served:
        provider = HTTPProvider(
            url=f"{served.url}/predict", output_path="$.output", body={"input": "{payload}"}
        )
        started = asyncio.run(_invoke_all(provider, [EchoProbe(sleep_ms=350).request(0)]))
    (result,) = started
    assert result.output == {"echo": "x" * 16}
    # 0.3 s boot + 0.35 s run = ~0.65 s: /predict and several /result hops answered 303
    assert fleet.faults.count("poll") >= 4
    assert fleet.truths()[0].status.value == "completed"


def test_a_redirect_nobody_follows_cancels_the_job_and_one_followed_does_not() -> None:
    """A client cancelled between two hops of the 303 chain has no connection left whose
    closing the service could see: the job it never came back for is cancelled once
    ``reclaim_within_s`` passes (the conformance suite's cancellation test hit that gap)."""
    import httpx

    fleet = _fleet()
    # the hop's own wait (0.3 s) outlasts the first 303's window (0.2 s): it must not cancel
    app = make_app(fleet, redirect_after_s=0.3, reclaim_within_s=0.2)
    with serve(app) as served, httpx.Client(base_url=served.url, follow_redirects=False) as client:
        first = client.post("/predict", json={"input": {"sleep_ms": 5_000}})
        assert first.status_code == 303
        hop = client.get(first.headers["location"])  # came back in time: not abandoned
        hop_at = time.monotonic()
        assert hop.status_code == 303
        assert fleet.truths()[0].status.value in ("queued", "running")
        while fleet.truths()[0].status.value != "cancelled":
            assert time.monotonic() < hop_at + 3, fleet.truths()[0]
            time.sleep(0.02)
        assert time.monotonic() - hop_at >= 0.15  # not before the hop's window closed
        assert client.get(hop.headers["location"]).status_code == 500  # cancelled: failed


def test_unfollowed_redirect_and_non_json_are_invalid() -> None:
    fleet = _fleet()
    with serve(make_app(fleet, redirect_after_s=0.05)) as served:

        async def go() -> Exception:
            from gpubench_sdk import make_client

            client = make_client(follow_redirects=False)
            provider = HTTPProvider(url=f"{served.url}/predict", client=client)
            try:
                async with provider:
                    await provider.invoke(EchoProbe(sleep_ms=200).request(0))
            except InvalidResponseError as exc:
                return exc
            finally:
                await client.aclose()
            raise AssertionError("a 303 was taken for an answer")

        assert "unfollowed redirect 303" in str(asyncio.run(go()))


def test_health_url_reads_readiness() -> None:
    fleet = _fleet(idle_timeout_s=0.3)
    with serve(make_app(fleet)) as served:
        provider = HTTPProvider(url=f"{served.url}/predict", health_url=f"{served.url}/health")
        assert provider.capabilities.fleet_state

        async def go() -> list[Any]:
            async with provider:
                before = await provider.state()
                await provider.invoke(EchoProbe().request(0))
                during = await provider.state()
                await asyncio.sleep(0.6)  # past the idle timeout: scaled to zero
                return [before, during, await provider.state()]

        before, during, after = asyncio.run(go())
    assert before.is_cold and not during.is_cold and after.is_cold
    assert during.detail == {"healthy": True, "status": 200}
    assert not HTTPProvider(url="http://x/p").capabilities.fleet_state


def test_a_429_names_the_call_shows_the_error_text_and_reads_an_http_date() -> None:
    """The core's error for a status: method and URL, the answer's own ``detail`` text in
    place of its raw body, and ``Retry-After`` as an HTTP date read as the seconds left (the
    plugin's own float-only parser gave None)."""
    from gpubench_sdk import ThrottledError
    from gpubench_sdk.testing import Fault

    fleet = _fleet()
    fleet.faults.next(1, Fault.throttle(30, body='{"detail": "slow down"}', as_date=True))
    with serve(make_app(fleet)) as served:
        provider = HTTPProvider(url=f"{served.url}/predict")
        with pytest.raises(ThrottledError) as info:
            asyncio.run(_invoke_all(provider, [EchoProbe().request(0)]))
    error = info.value
    assert str(error) == f"[http] POST {served.url}/predict: HTTP 429 Too Many Requests: slow down"
    assert error.status_code == 429
    assert error.retry_after_s is not None and 27 <= error.retry_after_s <= 30
