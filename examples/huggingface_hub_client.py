"""huggingface_hub, Hugging Face's own client, and gpubench on one emulated Inference Endpoint:
the client manages and calls it as it would a real one, then gpubench benchmarks it, and both
count the same tokens. No account; the emulator is gpubench_huggingface.emulator.

Run: python examples/huggingface_hub_client.py
(needs the plugin's testing extra: pip install -e './plugins/huggingface[testing]')
"""

from __future__ import annotations

import anyio
import huggingface_hub
from gpubench_huggingface import HuggingFaceProvider
from gpubench_huggingface.emulator import make_app
from huggingface_hub import HfApi

import gpubench_sdk as gb
from gpubench_sdk.testing import Duration, FleetConfig, SimulatedFleet, serve

TOKEN = "hf_example_token_1234"
NAMESPACE, NAME = "my-org", "llama-demo"


def with_the_official_client(management_url: str) -> None:
    # every HfApi Inference Endpoints call reads this base at call time; it has no other setting
    huggingface_hub.constants.INFERENCE_ENDPOINTS_ENDPOINT = management_url
    endpoint = HfApi().get_inference_endpoint(NAME, namespace=NAMESPACE, token=TOKEN)
    print(f"huggingface_hub: {endpoint.name} is {endpoint.status} at {endpoint.url}")
    endpoint.update(min_replica=1, max_replica=2)  # keep a replica up: no cold start
    endpoint.wait(timeout=30, refresh_every=1)
    # keep the client: `endpoint.client` makes a new one each time, and a stream dies with its
    # client (huggingface_hub 2.4 closes it when the client is collected)
    client = endpoint.client
    out = client.text_generation("one two three", max_new_tokens=8, details=True)
    assert out.details is not None
    print(f"huggingface_hub: {out.details.generated_tokens} tokens: {out.generated_text!r}")
    streamed = list(client.text_generation("one two", max_new_tokens=4, stream=True))
    print(f"huggingface_hub: streamed {len(streamed)} tokens")


async def with_gpubench(url: str, management_url: str, store: str) -> None:
    provider = HuggingFaceProvider(
        api_key=TOKEN,
        url=url,
        namespace=NAMESPACE,
        endpoint_name=NAME,
        management_url=management_url,
        route="generate",  # TGI's /generate: its timing headers become queue/execution times
        minute_s=1.0,
    )
    workload = gb.LLMCompletion(prompt_tokens=3, max_tokens=8)
    result = await gb.run({"hf": provider}, workload, [gb.Burst(20, 2)], store=store)
    with gb.Store(store) as s:
        (row,) = gb.summarize(s, result.run)
        tokens = {i.output_units for i in s.invocations(result.run.id)}
    print(f"gpubench: n={row.requests} ok={row.ok} p50={row.p50_ms:.1f} ms, tokens {tokens}")
    assert row.ok == row.requests == 20 and tokens == {8}


def main() -> None:
    fleet = SimulatedFleet(FleetConfig(cold_start=Duration.fixed(0.5), max_workers=2))
    app = make_app(fleet, api_key=TOKEN, namespace=NAMESPACE, endpoint_name=NAME, minute_s=1.0)
    with serve(app) as served:
        management_url = f"{served.url}/v2"
        with_the_official_client(management_url)
        anyio.run(with_gpubench, served.url, management_url, "huggingface-hub-client.sqlite")


if __name__ == "__main__":
    main()
