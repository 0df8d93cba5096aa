"""Against moto in server mode (ThreadedMotoServer on 127.0.0.1, a random port) over real
HTTP, for what moto implements: invoke_endpoint with canned results, endpoints and their
configs (describe_endpoint), invoke_endpoint_async with its S3 output. moto is AWS-neutral
third-party software: the plugin runs against it unchanged (sequential and burst runs record
no error), and its control-plane answers are a second opinion on our emulator's. moto 5 has
no inference components and no response streams: those run against our emulator only."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import boto3
import httpx
import pytest
from botocore.exceptions import ClientError
from gpubench_sagemaker import SageMakerProvider
from gpubench_sagemaker.emulator import DEFAULT_ENDPOINT, make_app

from gpubench_sdk import Burst, EchoProbe, Outcome, Request, ServerHTTPError, Store, run
from gpubench_sdk.testing import SimulatedFleet, serve

ACCESS_KEY_ID = "AKIAMOTOGPUBENCH0001"
SECRET = "moto-secret-3b9f0c2e7d41"
REGION = "us-east-1"


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    kw: dict[str, Any] = {
        "region_name": REGION,
        "aws_access_key_id": ACCESS_KEY_ID,
        "aws_secret_access_key": SECRET,
        "endpoint_url": url,
    }
    control = boto3.client("sagemaker", **kw)
    control.create_model(
        ModelName="echo",
        ExecutionRoleArn="arn:aws:iam::123456789012:role/sagemaker",
        PrimaryContainer={"Image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/echo:1"},
    )
    control.create_endpoint_config(
        EndpointConfigName="echo-config",
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": "echo",
                "InitialInstanceCount": 2,
                "InstanceType": "ml.g4dn.xlarge",  # one T4; moto knows no g5/g6 types
            }
        ],
    )
    control.create_endpoint(EndpointName="echo", EndpointConfigName="echo-config")
    boto3.client("s3", **kw).create_bucket(Bucket="inputs")
    try:
        yield url
    finally:
        server.stop()


def provider(url: str, **extra: Any) -> SageMakerProvider:
    return SageMakerProvider(
        endpoint_name="echo",
        region=REGION,
        aws_access_key_id=ACCESS_KEY_ID,
        api_key=SECRET,
        runtime_url=url,
        control_url=url,
        s3_url=url,
        **extra,
    )


def queue_results(url: str, path: str, results: list[dict[str, Any]]) -> None:
    httpx.post(f"{url}/moto-api/static/sagemaker/{path}", json={"results": results})


def test_invoke_endpoint_reads_body_and_variant(moto_url: str) -> None:
    queue_results(
        moto_url,
        "endpoint-results",
        [
            {
                "Body": json.dumps({"echo": f"moto-{i}"}),
                "ContentType": "application/json",
                "InvokedProductionVariant": f"variant-{i}",
            }
            for i in range(2)
        ],
    )

    async def go() -> list[Any]:
        async with provider(moto_url) as p:
            # moto repeats a result for the same body: distinct payloads take the next one
            return [await p.invoke(Request(seq=i, payload={"i": i})) for i in range(2)]

    results = asyncio.run(go())
    assert [r.output for r in results] == [{"echo": "moto-0"}, {"echo": "moto-1"}]
    assert [r.detail for r in results] == [
        {"invoked_production_variant": "variant-0"},
        {"invoked_production_variant": "variant-1"},
    ]
    assert all(r.request_id and r.cold is False and r.first_byte_ns for r in results)


def test_state_counts_the_endpoint_instances(moto_url: str) -> None:
    async def go() -> Any:
        async with provider(moto_url) as p:
            return await p.state()

    state = asyncio.run(go())
    assert (state.ready, state.starting, state.busy) == (2, 0, None)
    assert state.detail["endpoint_status"] == "InService"
    assert state.detail["variants"] == ["AllTraffic"]


def test_async_inference_polls_s3_for_the_output(moto_url: str) -> None:
    queue_results(
        moto_url,
        "async-endpoint-results",
        [
            {"data": json.dumps({"echo": "async-ok"})},
            {"is_failure": True, "data": "second inference failed"},
        ],
    )

    async def go() -> tuple[Any, BaseException]:
        async with provider(
            moto_url, async_input_s3="s3://inputs/gpubench", async_poll_interval_s=0.05
        ) as p:
            ok = await p.invoke(Request(seq=0, payload={"n": 0}))
            try:
                await p.invoke(Request(seq=1, payload={"n": 1}))
            except ServerHTTPError as exc:
                return ok, exc
        raise AssertionError("the failed async inference was not reported")

    ok, failed = asyncio.run(go())
    assert ok.output == {"echo": "async-ok"} and ok.request_id
    assert "second inference failed" in str(failed)
    uploaded = boto3.client(
        "s3",
        region_name=REGION,
        aws_access_key_id=ACCESS_KEY_ID,
        aws_secret_access_key=SECRET,
        endpoint_url=moto_url,
    ).list_objects_v2(Bucket="inputs", Prefix="gpubench/")
    assert uploaded["KeyCount"] == 2  # each input went to S3 first


def test_sequential_and_burst_runs_record_no_error(moto_url: str, tmp_path: Any) -> None:
    """The plugin unchanged through the runner: 20 one at a time, then 40 with 10 in flight.
    moto answers the first new body with the next queued result and repeats it for the same
    body, so the probe's (fixed) request gets its echo back every time."""
    probe = EchoProbe(sleep_ms=0, payload_bytes=24)
    echo = {"echo": probe.request(0).payload["echo"]}
    queue_results(
        moto_url,
        "endpoint-results",
        [{"Body": json.dumps(echo), "ContentType": "application/json"}],
    )
    store = tmp_path / "moto.sqlite"
    outcome = asyncio.run(
        run(
            {"moto": provider(moto_url)},
            probe,
            [Burst(total=20, concurrency=1), Burst(total=40, concurrency=10)],
            store=store,
        )
    )
    assert outcome.status == "completed" and outcome.requests == 60
    with Store(store) as s:
        invocations = s.invocations(outcome.run_id)
    assert len(invocations) == 60
    assert [i.error for i in invocations if i.outcome is not Outcome.OK] == []


def test_moto_and_our_emulator_agree_on_describe_endpoint(moto_url: str) -> None:
    """What the plugin reads from DescribeEndpoint is in both answers, and an unknown name is
    the same ValidationException ("Could not find endpoint ...") from both. (moto's answer is
    not complete: its DataCaptureConfig lacks members botocore's model requires, so the full
    check runs on our emulator only, in test_sagemaker_official_client.py.)"""
    kw: dict[str, Any] = {
        "region_name": REGION,
        "aws_access_key_id": ACCESS_KEY_ID,
        "aws_secret_access_key": SECRET,
    }
    app = make_app(SimulatedFleet(), credentials={ACCESS_KEY_ID: SECRET})
    read = ("VariantName", "CurrentInstanceCount", "DesiredInstanceCount")
    with serve(app) as emulator:
        for url, name in ((moto_url, "echo"), (emulator.url, DEFAULT_ENDPOINT)):
            control = boto3.client("sagemaker", endpoint_url=url, **kw)
            answer = control.describe_endpoint(EndpointName=name)
            assert answer["EndpointName"] == name and answer["EndpointStatus"] == "InService"
            assert answer["EndpointArn"].endswith(f":endpoint/{name}")
            for variant in answer["ProductionVariants"]:
                assert all(key in variant for key in read), (url, variant)
            with pytest.raises(ClientError) as info:
                control.describe_endpoint(EndpointName="nope")
            error = info.value.response["Error"]
            assert error["Code"] == "ValidationException", url
            assert error["Message"].startswith("Could not find endpoint"), url
